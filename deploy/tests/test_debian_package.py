"""The Debian package, installed on this machine for real: dpkg -i, the installed binary with the
installed settings as the passkeyd user (a sign-up and a sign-in), systemd-analyze verify on the
unit, an upgrade that keeps the administrator's settings and data, dpkg -r (settings, data and
user stay), dpkg -P (nothing of the package is left).

Needs root and dpkg (CI runs ./scripts/test as root, in a container). It never touches a passkeyd
someone else installed: skipped when a passkeyd package is known to dpkg in any state, or its
user, group, settings or data exist; and on a machine where systemd runs (a developer's), unless
PASSKEYD_TEST_INSTALL_PACKAGE=1 says to go ahead. It purges only what it installed.
"""

import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from shipping import ROOT, Server, binary, get, path_of, require_root, sign_up_and_sign_in

UNIT = Path("/usr/lib/systemd/system/passkeyd.service")
SETTINGS = Path("/etc/passkeyd/passkeyd.json")
SECRETS = Path("/etc/passkeyd/passkeyd.env")
DATA = Path("/var/lib/passkeyd")
# Where the package, its scripts, adduser and deb-systemd-helper write; the user and group files
# are compared by content.
WATCHED = (
    "/etc/passkeyd", "/etc/systemd", "/usr/bin", "/usr/lib/systemd/system", "/usr/share/passkeyd",
    "/usr/share/doc/passkeyd", "/var/lib/passkeyd", "/var/lib/systemd",
)  # fmt: skip
ACCOUNT_FILES = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")


def run(*command, check=True):
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300)
    print("$", " ".join(str(part) for part in command))
    print(result.stdout + result.stderr, end="")
    if check:
        assert result.returncode == 0, f"{command[0]} exited with {result.returncode}"
    return result


def snapshot():
    """Every path under the watched folders, and the content of the account files."""
    paths = set()
    for top in WATCHED:
        if os.path.lexists(top):
            paths.add(top)
        for folder, directories, files in os.walk(top):
            paths.update(os.path.join(folder, name) for name in directories + files)
    accounts = {name: Path(name).read_text() for name in ACCOUNT_FILES if Path(name).exists()}
    return paths, accounts


def known_to_dpkg(package="passkeyd"):
    """dpkg's state of the package: None when dpkg knows nothing of it."""
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    if status.returncode != 0 or status.stdout.split()[-1:] == ["not-installed"]:
        return None
    return status.stdout


def installed(package="passkeyd"):
    state = known_to_dpkg(package)
    return state is not None and state.split()[-1] == "installed"


def someone_elses_passkeyd():
    """Why this machine already has a passkeyd of its own, or None."""
    if known_to_dpkg():
        return f"dpkg knows a passkeyd package ({known_to_dpkg()})"
    for path in (Path("/usr/bin/passkeyd"), Path("/etc/passkeyd"), DATA, Path("/etc/systemd/system/passkeyd.service")):
        if path.exists() or path.is_symlink():
            return f"{path} exists"
    for lookup, name in ((pwd.getpwnam, "user"), (grp.getgrnam, "group")):
        try:
            lookup("passkeyd")
            return f"a passkeyd {name} exists"
        except KeyError:
            pass
    if Path("/run/systemd/system").is_dir() and os.environ.get("PASSKEYD_TEST_INSTALL_PACKAGE") != "1":
        return "systemd runs here (a developer's machine?): set PASSKEYD_TEST_INSTALL_PACKAGE=1 to install the package anyway"
    return None


def build(out, version=None):
    env = {**os.environ, "PASSKEYD_DEB_COMPRESSION": "none"}
    if version:
        env["PASSKEYD_DEB_VERSION"] = version
    result = subprocess.run([str(ROOT / "scripts" / "package"), "deb", str(out), str(binary())], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    require_root("installing a Debian package")
    for tool in ("dpkg", "dpkg-deb", "runuser", "objdump"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    reason = someone_elses_passkeyd()
    if reason:
        pytest.skip(reason)
    return build(tmp_path_factory.mktemp("deb"))


def test_the_package_declares_its_files_settings_and_dependencies(package):
    info = run("dpkg-deb", "--info", package).stdout
    assert "Package: passkeyd" in info
    assert f"Version: {(ROOT / 'VERSION').read_text().strip()}" in info
    # libc6 at least the newest glibc symbol version the binary asks for.
    needed = sorted(
        {tuple(int(part) for part in version.split(".")) for version in re.findall(r"GLIBC_([0-9.]+)", subprocess.run(["objdump", "-T", str(binary())], capture_output=True, text=True, check=True).stdout)}
    )[-1]
    depends = re.search(r"Depends: libc6 \(>= ([0-9.]+)\)", info)
    assert depends and tuple(int(part) for part in depends.group(1).split(".")) == needed, info
    contents = run("dpkg-deb", "--contents", package).stdout
    for path in (path_of("binary"), path_of("web-ui") + "/index.html", str(UNIT), str(SETTINGS)):
        assert "." + path in contents, f"{path} is not in the package"
    assert "." + str(SECRETS) not in contents, "the secrets file is made by postinst, never shipped (no conffile prompt)"
    control = Path(run("mktemp", "-d").stdout.strip())
    try:
        run("dpkg-deb", "--control", package, control)
        assert (control / "conffiles").read_text().split() == [str(SETTINGS)]
        listed = {line.split(maxsplit=1)[1] for line in (control / "md5sums").read_text().splitlines()}
        assert path_of("binary").lstrip("/") in listed and str(UNIT).lstrip("/") in listed
    finally:
        shutil.rmtree(control)


def serve_installed(tmp_path, username):
    """The installed binary with the installed settings, as the unit runs it (systemd does not
    run in CI's container): the web UI found beside it, a sign-up and a sign-in."""
    server = Server(
        [shutil.which("runuser"), "-u", "passkeyd", "--", "/usr/bin/passkeyd", "serve", "--config", SETTINGS, "--listen", "127.0.0.1:0"],
        env={"PATH": "/usr/bin:/bin"}, cwd=DATA,
    )  # fmt: skip
    try:
        assert server.address["webUI"] == path_of("web-ui")
        assert get(server.url + "/")[0] == 200
        sign_up_and_sign_in(server.url, "http://localhost:8080", tmp_path / f"{username}.json", username)
        return server.address
    finally:
        server.stop()


def test_install_serve_upgrade_remove_and_purge(package, tmp_path):
    before = snapshot()
    ours = False
    try:
        run("dpkg", "-i", package)
        ours = True
        assert installed()

        # The user, the data folder and the settings' permissions.
        user = pwd.getpwnam("passkeyd")
        assert user.pw_uid < 1000 and user.pw_shell.endswith("nologin"), "passkeyd is not a system user without a shell"
        assert grp.getgrgid(user.pw_gid).gr_name == "passkeyd"
        data = DATA.stat()
        assert (data.st_uid, stat.S_IMODE(data.st_mode)) == (user.pw_uid, 0o750)
        for path in (SETTINGS, SECRETS):
            mode = path.stat()
            assert (mode.st_uid, mode.st_gid, stat.S_IMODE(mode.st_mode)) == (0, user.pw_gid, 0o640), path
        # Enabled for the next boot, not started with placeholder settings.
        assert Path("/etc/systemd/system/multi-user.target.wants/passkeyd.service").is_symlink()

        # The unit: systemd's own checker accepts it, and it carries the hardening docs/deploy.md names.
        if shutil.which("systemd-analyze"):
            result = run("systemd-analyze", "verify", UNIT, check=False)
            problems = [line for line in (result.stdout + result.stderr).splitlines() if "passkeyd" in line]
            assert result.returncode == 0 and not problems, problems
        unit = UNIT.read_text()
        for line in (
            "ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n",
            "ReadWritePaths=/var/lib/passkeyd", "User=passkeyd", "ExecStart=/usr/bin/passkeyd serve --config /etc/passkeyd/passkeyd.json",
        ):  # fmt: skip
            assert line in unit, f"the unit lacks {line!r}"

        first = serve_installed(tmp_path, "package-user")
        assert first["rpID"] == "localhost"
        database = DATA / "passkeyd.sqlite"
        assert database.stat().st_uid == user.pw_uid

        # The administrator's edits survive an upgrade: the settings (a conffile), the secrets
        # file (never shipped), the data; the user is the same.
        SETTINGS.write_text(SETTINGS.read_text().replace('"rpName": "passkeyd"', '"rpName": "Edited by the administrator"'))
        SECRETS.write_text("PASSKEYD_RP_NAME=Secret name\n")
        newer = build(tmp_path / "newer", version=(ROOT / "VERSION").read_text().strip() + "+upgrade1")
        run("dpkg", "-i", newer)
        assert "upgrade1" in run("dpkg-query", "-W", "-f=${Version}", "passkeyd").stdout
        assert "Edited by the administrator" in SETTINGS.read_text()
        assert SECRETS.read_text() == "PASSKEYD_RP_NAME=Secret name\n"
        assert pwd.getpwnam("passkeyd").pw_uid == user.pw_uid
        assert SETTINGS.stat().st_gid == user.pw_gid, "the upgrade left the settings unreadable by the service"
        serve_installed(tmp_path, "after-upgrade")

        # Remove: the program goes; the settings, the data and the user stay for a reinstall.
        run("dpkg", "-r", "passkeyd")
        assert not Path(path_of("binary")).exists() and not UNIT.exists() and not Path(path_of("web-ui")).exists()
        assert SETTINGS.exists() and SECRETS.exists() and database.exists()
        pwd.getpwnam("passkeyd")

        # A reinstall finds them: the accounts made before still there.
        run("dpkg", "-i", package)
        assert "Edited by the administrator" in SETTINGS.read_text()
        serve_installed(tmp_path, "after-reinstall")
        count = subprocess.run(
            ["python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM accounts').fetchone()[0])", database],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert count.stdout.strip() == "3"
    finally:
        # Purge what this test installed, whatever failed above: nothing is left.
        if ours and known_to_dpkg():
            run("dpkg", "-P", "passkeyd", check=False)
    assert known_to_dpkg() is None
    after = snapshot()
    assert sorted(after[0] - before[0]) == [], "purge left these behind"
    assert sorted(before[0] - after[0]) == [], "the package removed these, which it did not install"
    assert after[1] == before[1], "purge did not restore the user and group files"
