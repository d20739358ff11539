"""The Debian package, installed on this machine for real: dpkg -i, the installed binary with the
installed settings as the passkeyd user (a sign-up and a sign-in), systemd-analyze verify on the
unit, dpkg -r (settings and data stay), dpkg -P (nothing of the package is left).

Needs root and dpkg (CI runs ./scripts/test as root); skipped with the reason otherwise, and when a
passkeyd package is already installed here (the test never removes one it did not install).
"""

import grp
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from shipping import ROOT, Server, binary, get, path_of, require_root, sign_up_and_sign_in

UNIT = Path("/usr/lib/systemd/system/passkeyd.service")
SETTINGS = Path("/etc/passkeyd/passkeyd.json")
DATA = Path("/var/lib/passkeyd")
# Rewritten by useradd/userdel themselves (their backups), and dpkg's own records and logs.
NOT_COMPARED = ("/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-", "/etc/ld.so.cache")
WATCHED = ("/etc", "/usr/bin", "/usr/sbin", "/usr/lib/systemd", "/usr/share/passkeyd", "/usr/share/doc", "/var/lib", "/var/cache")
SKIPPED_TREES = ("/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf", "/var/lib/postgresql", "/var/cache/ldconfig")


def run(*command, check=True):
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300)
    print("$", " ".join(str(part) for part in command))
    print(result.stdout + result.stderr, end="")
    if check:
        assert result.returncode == 0, f"{command[0]} exited with {result.returncode}"
    return result


def snapshot():
    """Every path under the watched folders, with the content of the account files."""
    paths = set()
    for top in WATCHED:
        for folder, directories, files in os.walk(top):
            if folder.startswith(SKIPPED_TREES):
                directories[:] = []
                continue
            for name in directories + files:
                path = os.path.join(folder, name)
                if path not in NOT_COMPARED:
                    paths.add(path)
    accounts = {name: Path(name).read_text() for name in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow") if Path(name).exists()}
    return paths, accounts


def installed(package="passkeyd"):
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return status.returncode == 0 and "installed" in status.stdout.split()


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    require_root("installing a Debian package")
    for tool in ("dpkg", "dpkg-deb", "runuser"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    if installed() or Path("/usr/bin/passkeyd").exists():
        pytest.skip("a passkeyd package or /usr/bin/passkeyd is already on this machine")
    out = tmp_path_factory.mktemp("deb")
    env = {**os.environ, "PASSKEYD_DEB_COMPRESSION": "none"}
    result = subprocess.run([str(ROOT / "scripts" / "package"), "deb", str(out), str(binary())], env=env, capture_output=True, text=True, check=True)
    return Path(result.stdout.strip().splitlines()[-1])


def test_the_package_declares_its_files_settings_and_dependencies(package):
    info = run("dpkg-deb", "--info", package).stdout
    assert "Package: passkeyd" in info and "Depends: libc6" in info
    assert (ROOT / "VERSION").read_text().strip() in info
    contents = run("dpkg-deb", "--contents", package).stdout
    for path in (path_of("binary"), path_of("web-ui") + "/index.html", str(UNIT), str(SETTINGS), "/etc/passkeyd/passkeyd.env"):
        assert "." + path in contents, f"{path} is not in the package"
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", package], capture_output=True, check=True).stdout
    assert b"conffiles" in conffiles


def test_install_serve_remove_and_purge(package, tmp_path):
    before = snapshot()
    try:
        run("dpkg", "-i", package)
        assert installed()

        # The user, the data folder and the settings' permissions.
        user = pwd.getpwnam("passkeyd")
        assert user.pw_uid < 1000 and user.pw_shell.endswith("nologin"), "passkeyd is not a system user without a shell"
        assert grp.getgrgid(user.pw_gid).gr_name == "passkeyd"
        data = DATA.stat()
        assert (data.st_uid, stat.S_IMODE(data.st_mode)) == (user.pw_uid, 0o750)
        settings = SETTINGS.stat()
        assert (settings.st_uid, settings.st_gid, stat.S_IMODE(settings.st_mode)) == (0, user.pw_gid, 0o640)

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

        # The installed binary, with the installed settings, as the unit runs it (systemd itself
        # does not run in CI's container): the web UI found beside it, a sign-up and a sign-in.
        server = Server(
            [shutil.which("runuser"), "-u", "passkeyd", "--", "/usr/bin/passkeyd", "serve", "--config", SETTINGS, "--listen", "127.0.0.1:0"],
            env={"PATH": "/usr/bin:/bin"}, cwd=DATA,
        )  # fmt: skip
        try:
            assert server.address["webUI"] == path_of("web-ui")
            assert get(server.url + "/")[0] == 200
            sign_up_and_sign_in(server.url, "http://localhost:8080", tmp_path / "passkeys.json", "package-user")
        finally:
            server.stop()
        database = DATA / "passkeyd.sqlite"
        assert database.stat().st_uid == user.pw_uid

        # Remove: the program goes; the settings, the data and the user stay for a reinstall.
        run("dpkg", "-r", "passkeyd")
        assert not Path(path_of("binary")).exists() and not UNIT.exists() and not Path(path_of("web-ui")).exists()
        assert SETTINGS.exists() and database.exists()
        pwd.getpwnam("passkeyd")
    finally:
        # Purge: nothing is left, whatever failed above.
        if installed() or subprocess.run(["dpkg-query", "-W", "passkeyd"], capture_output=True).returncode == 0:
            run("dpkg", "-P", "passkeyd", check=False)
    assert not installed()
    after = snapshot()
    assert sorted(after[0] - before[0]) == [], "purge left these behind"
    assert sorted(before[0] - after[0]) == [], "the package removed these, which it did not install"
    assert after[1] == before[1], "purge did not restore the user and group files"
