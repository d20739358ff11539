"""Browser tests: a real passkeyd server and headless Chromium with WebDriver's virtual authenticator.

scripts/test sets PASSKEYD_BINARY; each test module gets its own server on a free loopback port
and a temporary SQLite database, and each test a fresh browser.
"""
import http.server
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_page(page, port):
    """Serves one HTML page (`page`: the text) for every GET on 127.0.0.1:`port`, in a thread:
    another origin's page (an app, an attacker) in browser tests. Stop it with `.shutdown()`."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def wait_healthy(port, process, seconds=60) -> bool:
    """Until the server on `port` answers /healthz with 200: False after `seconds` (a debug build
    starting beside other work) or at once when `process` has exited."""
    deadline = time.time() + seconds
    while time.time() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


class Server:
    def __init__(self, extra_origins=(), **extra_env):
        binary = os.environ.get("PASSKEYD_BINARY") or str(ROOT / ".build" / "debug" / "passkeyd")
        self.binary = binary
        self.port = free_port()
        self.origin = f"http://localhost:{self.port}"
        self.directory = tempfile.mkdtemp(prefix="passkeyd-e2e-")
        env = dict(os.environ, PASSKEYD_LISTEN=f"127.0.0.1:{self.port}", PASSKEYD_ORIGINS=",".join([self.origin, *extra_origins]),
                   PASSKEYD_PUBLIC_DIRECTORY=str(ROOT / "Public"), PASSKEYD_CONFIG=os.devnull + ".absent",
                   # The decoy scrypt hash is made at start: cheap cost in tests (debug builds are slow).
                   PASSKEYD_PASSWORD_SCRYPT_COST="10")
        env.pop("PASSKEYD_CONFIG")
        env.update(extra_env)
        self.log = open(os.path.join(self.directory, "serve.log"), "w")
        self.process = subprocess.Popen([binary, "serve", "--database", f"sqlite://{self.directory}/e2e.sqlite"],
                                        cwd=self.directory, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        if wait_healthy(self.port, self.process):
            return
        self.stop()
        raise RuntimeError("passkeyd did not start; see " + self.log.name)

    @property
    def database(self):
        return f"sqlite://{self.directory}/e2e.sqlite"

    def passkeyd(self, *args, stdin=None):
        """Runs a `passkeyd` command (import, admin …) on this server's database."""
        env = dict(os.environ)
        env.pop("PASSKEYD_CONFIG", None)
        env["PASSKEYD_ORIGINS"] = self.origin
        # `passkeyd tenant` names the server's database --server-database (its `add --database`
        # is a tenant's own).
        flag = "--server-database" if args and args[0] == "tenant" else "--database"
        return subprocess.run([self.binary, *args, flag, self.database], cwd=self.directory, env=env,
                              capture_output=True, text=True, input=stdin, timeout=60)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def migration_server():
    """Imported password accounts (cost-4 bcrypt in the tests; new hashes scrypt at the cheap test cost)."""
    s = Server(PASSKEYD_PASSWORD_SCRYPT_COST="10")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def impatient_server():
    """Ceremonies expire after 10 s, so a browser waiting for a passkey that does not exist gives up soon."""
    s = Server(PASSKEYD_CHALLENGE_LIFETIME="10")
    yield s
    s.stop()


def authenticator_options(user_verified=True, consenting=True):
    options = VirtualAuthenticatorOptions()
    options.protocol = VirtualAuthenticatorOptions.Protocol.CTAP2
    options.transport = VirtualAuthenticatorOptions.Transport.INTERNAL
    options.has_resident_key = True
    options.has_user_verification = True
    options.is_user_verified = user_verified
    options.is_user_consenting = consenting
    return options


def chrome(languages=()):
    """Headless Chromium; `languages` (e.g. ["fr", "fr-FR"]) become its UI language and
    Accept-Language, so `navigator.languages`."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,900", "--disable-gpu"):
        options.add_argument(flag)
    if languages:
        options.add_argument("--lang=" + languages[0])
        options.add_experimental_option("prefs", {"intl.accept_languages": ",".join(languages)})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.implicitly_wait(0)
    return driver


@pytest.fixture
def browser():
    driver = chrome()
    yield driver
    driver.quit()


@pytest.fixture
def french_browser():
    """A browser whose person reads French (Accept-Language: fr)."""
    driver = chrome(["fr", "fr-FR"])
    yield driver
    driver.quit()
