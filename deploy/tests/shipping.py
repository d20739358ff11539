"""What the image and package tests share: the built binary, a server started from it, and the
`passkey` CLI (a software passkey provider) that signs up and signs in against it.

PASSKEYD_BINARY names the passkeyd binary (scripts/test sets it); else .build/debug/passkeyd.
"""

import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def binary() -> Path:
    path = Path(os.environ.get("PASSKEYD_BINARY", ROOT / ".build" / "debug" / "passkeyd"))
    if not path.is_file():
        pytest.skip(f"no passkeyd binary at {path} (swift build --product passkeyd, or set PASSKEYD_BINARY)")
    return path


def passkey_cli() -> Path:
    path = binary().parent / "passkey"
    if not path.is_file():
        pytest.skip(f"no passkey binary beside {binary()} (swift build --product passkey)")
    return path


def require_root(what: str):
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (CI runs ./scripts/test as root)")


def image_files():
    """deploy/image.files as (path, kind, mode, owner) tuples."""
    rows = []
    for line in (ROOT / "deploy" / "image.files").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path, kind, mode, owner = line.split()
        rows.append((path, kind, mode, owner))
    return rows


def path_of(kind: str) -> str:
    return next(path for path, entry_kind, _, _ in image_files() if entry_kind == kind)


class Server:
    """A passkeyd process started by `command`, its log read until it names its address."""

    def __init__(self, command, env, cwd=None):
        self.log = tempfile.NamedTemporaryFile(prefix="passkeyd-", suffix=".log", delete=False)
        print("starting:", shlex.join(str(part) for part in command))
        self.process = subprocess.Popen(
            [str(part) for part in command], env=env, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.address = self._wait_for_address()

    def _wait_for_address(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"passkeyd exited with {self.process.returncode}:\n{self.text()}")
            for line in self.text().splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("message") == "passkeyd listening":
                    return entry
            time.sleep(0.1)
        raise AssertionError(f"passkeyd did not report its address:\n{self.text()}")

    @property
    def url(self) -> str:
        return f"http://{self.address['address']}"

    def text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        Path(self.log.name).unlink(missing_ok=True)


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def sign_up_and_sign_in(server_url: str, origin: str, store: Path, username: str):
    """A real sign-up and a discoverable sign-in by the `passkey` CLI; returns their outputs."""
    common = ["--server", server_url, "--origin", origin, "--store", str(store)]
    outputs = []
    for arguments in (["register", "--username", username], ["sign-in"]):
        result = subprocess.run([str(passkey_cli()), arguments[0], *common, *arguments[1:]], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"passkey {arguments[0]} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        outputs.append(result.stdout)
    assert f"Signed in as {username}" in outputs[1], outputs[1]
    return outputs
