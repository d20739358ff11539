"""The container image, proven without a Docker engine: the Dockerfile's final stage copies exactly
deploy/image.files, the binary needs only the C library, and passkeyd serves a real sign-up and
sign-in from a root file system made of those files and the base image's (scripts/package
image-root), under chroot as the image's unprivileged user, with /proc its own (unshare).
"""

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from shipping import ROOT, Server, binary, get, image_files, path_of, require_root, sign_up_and_sign_in

DOCKERFILE = ROOT / "Dockerfile"
IMAGE_USER = "65532:65532"


def final_stage():
    """The Dockerfile's instructions after its last FROM, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    last_from = max(index for index, line in enumerate(lines) if line.upper().startswith("FROM "))
    return lines[last_from:]


def instructions(keyword):
    return [line[len(keyword) + 1 :].strip() for line in final_stage() if line.upper().startswith(keyword + " ")]


def exec_form(value):
    import json

    return json.loads(value)


def image_env():
    env = {}
    for value in instructions("ENV"):
        for name, setting in re.findall(r"(\w+)=(\S+)", value):
            env[name] = setting
    return env


def test_the_final_stage_copies_exactly_the_image_files_with_their_owners():
    copied = {}
    for value in instructions("COPY"):
        parts = value.split()
        options = [part for part in parts if part.startswith("--")]
        source, destination = [part for part in parts if not part.startswith("--")]
        assert "--from=build" in options, f"COPY {value} does not copy from the build stage"
        owner = next((option.split("=", 1)[1] for option in options if option.startswith("--chown=")), None)
        assert source == "/stage" + destination, f"COPY {value}: the staged path is not the image path"
        copied[destination] = owner
    listed = {path: owner for path, _, _, owner in image_files()}
    assert copied == listed


def test_the_image_runs_as_nonroot_with_its_data_volume_owned_by_that_user():
    assert instructions("USER") == [IMAGE_USER]
    # The working directory is not the volume: nothing the service writes is read as settings.
    assert instructions("WORKDIR") == ["/"]
    volumes = [path for value in instructions("VOLUME") for path in exec_form(value)]
    assert volumes == [path_of("empty-directory")]
    owner = next(owner for path, _, _, owner in image_files() if path == volumes[0])
    assert owner == IMAGE_USER


def test_the_image_listens_on_the_exposed_port_and_keeps_sqlite_in_the_volume():
    env = image_env()
    assert instructions("EXPOSE") == ["8080"]
    assert env["PASSKEYD_LISTEN"] == "0.0.0.0:8080"
    assert env["PASSKEYD_DATABASE_URL"] == "sqlite://" + path_of("empty-directory") + "/passkeyd.sqlite"


def test_the_health_check_and_entrypoint_are_the_binary_itself_since_distroless_has_no_shell():
    (healthcheck,) = instructions("HEALTHCHECK")
    command = exec_form(healthcheck.split(" CMD ", 1)[1])
    assert command == [path_of("binary"), "healthcheck"]
    assert exec_form(instructions("ENTRYPOINT")[0]) == [path_of("binary")]
    assert exec_form(instructions("CMD")[0]) == ["serve"]


def test_the_binary_needs_only_the_c_library_libm_and_libgcc():
    output = subprocess.run(["ldd", str(binary())], capture_output=True, text=True, check=True).stdout
    print(output)
    names = {line.split()[0].rsplit("/", 1)[-1] for line in output.splitlines() if line.strip()}
    allowed = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
    assert names <= allowed, f"linked to {sorted(names - allowed)}: the Swift runtime, SQLite, zlib and libstdc++ are linked in"


def test_version_names_the_version_file_and_the_commit():
    output = subprocess.run([str(binary()), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    version = (ROOT / "VERSION").read_text().strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert re.fullmatch(rf"passkeyd {re.escape(version)} \(commit {head.stdout.strip()}(-dirty)?\)", output), output


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    require_root("running the image's root under chroot")
    for tool in ("unshare", "chroot", "ldd"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    root = tmp_path_factory.mktemp("image") / "root"
    subprocess.run([str(ROOT / "scripts" / "package"), "image-root", str(root), str(binary())], check=True)
    return root


def in_image(root, *arguments):
    """A command run in the image's root: its own /proc, chroot, the image's user."""
    return [
        shutil.which("unshare"), "--mount", "--pid", "--fork", "--kill-child", f"--mount-proc={root}/proc",
        shutil.which("chroot"), f"--userspec={IMAGE_USER}", str(root), *arguments,
    ]  # fmt: skip


def image_environment(**overrides):
    # Only what the image sets (its ENV lines) and the test's own listen address: nothing of this
    # machine's environment reaches the server.
    return {**image_env(), **overrides}


def test_the_image_root_holds_only_the_listed_files_and_the_base(image_root):
    listed = {path for path, _, _, _ in image_files()}
    base_prefixes = ("/etc/", "/lib", "/lib64/", "/usr/lib", "/tmp", "/proc", "/home")
    for path in sorted(image_root.rglob("*")):
        inside = "/" + str(path.relative_to(image_root))
        in_list = any(inside == entry or inside.startswith(entry + "/") or entry.startswith(inside + "/") for entry in listed)
        assert in_list or inside.startswith(base_prefixes) or inside in ("/etc", "/usr", "/lib", "/lib64"), inside


def test_passkeyd_serves_a_sign_up_and_a_sign_in_from_the_image_root_as_its_unprivileged_user(image_root, tmp_path):
    # A Public/ in the working directory (chroot starts in /, the image's WORKDIR) is never served
    # instead of the installed web UI.
    planted = image_root / "Public"
    planted.mkdir()
    (planted / "index.html").write_text("<script>planted</script>")
    try:
        server = Server(in_image(image_root, path_of("binary"), "serve"), env=image_environment(PASSKEYD_LISTEN="127.0.0.1:0"))
    finally:
        shutil.rmtree(planted)
    try:
        # The web UI's files are found beside the binary, with no setting naming them.
        assert server.address["webUI"] == path_of("web-ui")
        status, body = get(server.url + "/")
        assert status == 200 and body == (ROOT / "Public" / "index.html").read_bytes()
        assert get(server.url + "/readyz")[0] == 200

        sign_up_and_sign_in(server.url, "http://localhost:8080", tmp_path / "passkeys.json", "image-user")

        # The image's own health check, run inside the root as the image runs it.
        healthcheck = subprocess.run(
            in_image(image_root, path_of("binary"), "healthcheck"),
            env=image_environment(PASSKEYD_LISTEN=server.address["address"]), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert healthcheck.returncode == 0, healthcheck.stdout + healthcheck.stderr

        # The database is in the volume, written by the image's user.
        database = image_root / path_of("empty-directory").lstrip("/") / "passkeyd.sqlite"
        stat = database.stat()
        assert f"{stat.st_uid}:{stat.st_gid}" == IMAGE_USER
    finally:
        address = server.address["address"]
        server.stop()
    # A server that is gone fails the health check.
    healthcheck = subprocess.run(
        in_image(image_root, path_of("binary"), "healthcheck"),
        env=image_environment(PASSKEYD_LISTEN=address), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert healthcheck.returncode == 1, healthcheck.stdout + healthcheck.stderr


def test_version_inside_the_image_root_names_the_commit(image_root):
    result = subprocess.run(in_image(image_root, path_of("binary"), "--version"), env=image_environment(), capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("passkeyd "), result.stdout + result.stderr
    assert "(commit unknown)" not in result.stdout


def test_every_setting_the_dockerfile_and_the_package_name_is_one_the_server_reads():
    from test_manifests import known_settings

    known = known_settings()
    assert "PASSKEYD_LISTEN" in known
    paths = [DOCKERFILE, *sorted((ROOT / "deploy" / "debian").iterdir())]
    named = {name: path.name for path in paths for name in re.findall(r"PASSKEYD_[A-Z0-9_]+", path.read_text())}
    assert "PASSKEYD_DATABASE_URL" in named
    # A build argument, read by scripts/prebuild (the commit --version names), not a setting.
    named.pop("PASSKEYD_COMMIT", None)
    assert {name: where for name, where in named.items() if name not in known} == {}
