"""The operator's console (issue 36) in real Chromium with virtual passkey authenticators.

One server and one database for the whole module, and one story told in order: the first admin
from the bootstrap link printed at start; a scripted history over four UTC days (the three days
before today run the server under libfaketime, so every audit line carries the day it happened);
the overview's chart checked against the store; an admin's changes (a viewer granted, a passkey
removed, a recovery link issued, a webhook's secret rotated after a step-up); the viewer's
console; attacks; 375 px; French. The tests share state and run in file order (`pytest -x`).
"""
import base64
import datetime
import glob
import hashlib
import http.server
import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import bcrypt
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from conftest import ROOT, authenticator_options, free_port, wait_healthy
from test_recovery import GRANT_CONDITIONAL_CREATE
from test_web import SCREENSHOTS, message, passkey_names, visible, wait
from test_web import sign_up as sign_up_in_browser

FAKETIME = shutil.which("faketime")


def clear_stale_faketime_files():
    """faketime(1) keeps a semaphore and a shared-memory segment named after its PID in /dev/shm
    and removes them when it exits; one stopped with its server (SIGTERM to the group) leaves
    them, and a later faketime given the same PID then fails ("sem_open: File exists"): a CI run
    lost the console's scripted history that way. Those of processes no longer running go first."""
    for path in glob.glob("/dev/shm/sem.faketime_sem_*") + glob.glob("/dev/shm/faketime_shm_*"):
        pid = path.rsplit("_", 1)[-1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(path)
            except OSError:
                pass
pytestmark = pytest.mark.skipif(FAKETIME is None, reason="faketime(1) (Debian: faketime) is needed to run the server on earlier days")

DAY = 86_400_000
# The console's page: the bootstrap link printed at start points at it.
PAGE = "/admin/"
# A conditional (AutoFill) request that never offers anything: the page's passkey button then runs
# the modal ceremony, so a sign-in is the button's (sign_in_passkey), not AutoFill's.
NO_AUTOFILL = """
(() => {
  const get = navigator.credentials.get.bind(navigator.credentials);
  navigator.credentials.get = (options) => {
    if (options && options.mediation === 'conditional') {
      return new Promise((_, reject) => {
        if (options.signal) options.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
      });
    }
    return get(options);
  };
})();
"""
# Every CSP violation of the page, kept for the test to read.
CSP_WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""
EVIL = '<img src=x onerror="window.__xss=1">'

# Metric names (AdoptionMetric.swift) → how they move (with a passkey, password-only, no way in).
TRANSITIONS = {
    "signup_passkey": (1, 0, 0), "admin_bootstrap": (1, 0, 0), "passkey_first": (1, 0, -1), "upgrade_conditional": (1, -1, 0), "upgrade_button": (1, -1, 0),
    "upgrade_recovery": (1, -1, 0), "last_passkey_removed": (-1, 0, 1), "last_passkey_removed_password": (-1, 1, 0),
    "import_password": (0, 1, 0), "account_created_empty": (0, 0, 1), "account_deleted_passkey": (-1, 0, 0),
    "account_deleted_password": (0, -1, 0), "account_deleted_empty": (0, 0, -1), "baseline_with_passkey": (1, 0, 0),
    "baseline_password_only": (0, 1, 0), "baseline_empty": (0, 0, 1),
}
NEW_PASSKEY = ("signup_passkey", "passkey_first", "passkey_added", "upgrade_conditional", "upgrade_button", "upgrade_recovery")


class Receiver:
    """A webhook endpoint on 127.0.0.1 that answers 204 to every POST and keeps the bodies."""

    def __init__(self):
        self.port = free_port()
        self.bodies = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                receiver.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


class ConsoleServer:
    """`passkeyd serve` on one SQLite database across restarts, each start maybe on another day
    (faketime(1): the server's clock, SQLite's included, starts at `day` 10:00 UTC and runs)."""

    def __init__(self):
        self.binary = os.environ.get("PASSKEYD_BINARY") or str(ROOT / ".build" / "debug" / "passkeyd")
        self.port = free_port()
        self.origin = f"http://localhost:{self.port}"
        self.directory = tempfile.mkdtemp(prefix="passkeyd-console-")
        self.path = os.path.join(self.directory, "console.sqlite")
        self.database = "sqlite://" + self.path
        self.process = None
        self.starts = 0
        self.settings = {}      # more PASSKEYD_* for the next starts

    def env(self, day):
        env = dict(os.environ, PASSKEYD_LISTEN=f"127.0.0.1:{self.port}", PASSKEYD_ORIGINS=self.origin,
                   PASSKEYD_PUBLIC_DIRECTORY=str(ROOT / "Public"), PASSKEYD_PASSWORD_SCRYPT_COST="10",
                   PASSKEYD_WEBHOOK_ALLOW_PRIVATE="1", PASSKEYD_ADMIN_STEP_UP="10", TZ="UTC",
                   FAKETIME_DONT_FAKE_MONOTONIC="1", **self.settings)
        env.pop("PASSKEYD_CONFIG", None)
        return env

    def command(self, day, *args):
        """`passkeyd args…`, under faketime(1) when `day` is not today. (The binary started from
        Python with LD_PRELOAD set directly saw no arguments and printed its help.)"""
        if day is None or day == today():
            return [self.binary, *args]
        clear_stale_faketime_files()
        return [FAKETIME, "-f", f"@{day.isoformat()} 10:00:00", self.binary, *args]

    def start(self, day=None):
        self.starts += 1
        self.log_path = os.path.join(self.directory, f"serve-{self.starts}.log")
        self.err_path = os.path.join(self.directory, f"serve-{self.starts}.err")
        with open(self.log_path, "w") as out, open(self.err_path, "w") as err:
            self.process = subprocess.Popen(self.command(day, "serve", "--database", self.database), cwd=self.directory,
                                            env=self.env(day), stdout=out, stderr=err, start_new_session=True)
        if wait_healthy(self.port, self.process):
            return
        raise RuntimeError("passkeyd did not start; see " + self.err_path)

    def stderr(self):
        return pathlib.Path(self.err_path).read_text()

    def passkeyd(self, *args, day=None, stdin=None):
        return subprocess.run(self.command(day, *args, "--database", self.database), cwd=self.directory, env=self.env(day),
                              capture_output=True, text=True, input=stdin, timeout=120)

    def stop(self):
        if self.process:
            group = self.process.pid  # faketime(1) and its passkeyd share the group
            os.killpg(group, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            # The next start must not find this server still answering on the port.
            deadline = time.time() + 10
            while time.time() < deadline:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1).close()
                except OSError:
                    break
                time.sleep(0.2)
            else:
                os.killpg(group, signal.SIGKILL)
                time.sleep(0.5)
            self.process = None

    def query(self, sql, *args):
        with sqlite3.connect(self.path) as db:
            return db.execute(sql, args).fetchall()


def today():
    return datetime.datetime.now(datetime.timezone.utc).date()


def console_browser(width=1280, height=900):
    """Headless Chromium like conftest.chrome(), with the browser log kept and the CSP watched."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}", "--disable-gpu"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.implicitly_wait(0)
    driver.set_script_timeout(60)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CSP_WATCH})
    return driver


class World:
    """What the tests share: the server, the browsers, the people's passkeys and the history."""

    def __init__(self):
        self.server = ConsoleServer()
        self.receiver = Receiver()
        self.people = {}        # username → list of virtual-authenticator credentials
        self.codes = {}         # username → recovery codes
        self.expected = {}      # "YYYY-MM-DD" → {metric: n} the script made
        self.browser = None     # the history's browser (people at /)
        self.admin = None       # the admin's console
        self.viewer = None

    def count(self, day, metric, n=1):
        bucket = self.expected.setdefault(day.isoformat(), {})
        bucket[metric] = bucket.get(metric, 0) + n


@pytest.fixture(scope="module")
def world():
    w = World()
    w.browser = console_browser(1000, 900)
    yield w
    for driver in (w.browser, w.admin, w.viewer):
        if driver:
            driver.quit()
    w.server.stop()
    w.receiver.httpd.shutdown()
    shutil.rmtree(w.server.directory, ignore_errors=True)


# MARK: helpers

def screenshot(driver, name, width=1280, full=True):
    """`name` at `width` px, as tall as the page (at most 2400 px) when `full`."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if full:
        driver.set_window_size(width, 900)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(max(height + 140, 700), 2400))
        driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.4)  # the charts redraw at the new width
    driver.save_screenshot(str(SCREENSHOTS / name))
    if full:
        driver.set_window_size(width, 900)


def fetch(driver, method, path, body=None, headers=None):
    """A fetch from the page (its cookies, its Origin): {status, json|text, headers}."""
    answer = driver.execute_async_script("""
      const [method, path, body, headers, done] = arguments;
      const init = { method, headers: Object.assign({ Accept: 'application/json' }, headers || {}), credentials: 'same-origin', cache: 'no-store' };
      if (body !== null) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
      fetch(path, init).then(async (r) => done({ status: r.status, text: await r.text(), headers: Object.fromEntries(r.headers) }))
        .catch((e) => done({ status: 0, text: String(e), headers: {} }));
    """, method, path, body, headers)
    try:
        answer["json"] = json.loads(answer["text"])
    except ValueError:
        answer["json"] = None
    return answer


def error_code(answer):
    return ((answer.get("json") or {}).get("error") or {}).get("code")


def as_person(driver, credentials=None):
    """A fresh start at the account UI: no page, no cookies, no authenticator (or one holding
    `credentials`)."""
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    try:
        driver.remove_virtual_authenticator()
    except Exception:
        pass
    if credentials is not None:
        driver.add_virtual_authenticator(authenticator_options())
        for credential in credentials:
            driver.add_credential(credential)


def injected(driver, source):
    return driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": source})["identifier"]


def uninjected(driver, identifier):
    driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": identifier})


def sign_up(w, day, username, display_name=""):
    driver = w.browser
    as_person(driver, [])
    sign_up_in_browser(driver, w.server, username, display_name)
    visible(driver, "recovery-codes")
    w.codes[username] = driver.execute_script("return [...document.querySelectorAll('#recovery-codes-list li')].map(e => e.textContent)")
    w.people[username] = driver.get_credentials()
    w.count(day, "signup_passkey")


def import_passwords(w, day, users):
    path = os.path.join(w.server.directory, f"import-{day}.csv")
    with open(path, "w") as f:
        f.write("username,displayName,passwordHash\n")
        for username in users:
            f.write(f"{username},{username.title()},{bcrypt.hashpw(b'pw-' + username.encode(), bcrypt.gensalt(4)).decode()}\n")
    result = w.server.passkeyd("import", path, day=day)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"imported {len(users)}" in result.stdout
    w.count(day, "import_password", len(users))


def password_sign_in(w, day, username, upgrade=None, password_off=False):
    """A password sign-in; `upgrade`: None, "button" (the banner's button) or "conditional"
    (the browser's conditional create right after the sign-in)."""
    driver = w.browser
    as_person(driver, [] if upgrade else None)
    grant = injected(driver, GRANT_CONDITIONAL_CREATE) if upgrade == "conditional" else None
    try:
        driver.get(w.server.origin + "/#password")
        visible(driver, "view-password")
        driver.find_element(By.ID, "password-username").send_keys(username)
        driver.find_element(By.ID, "password-input").send_keys("pw-" + username)
        driver.find_element(By.ID, "password-button").click()
        visible(driver, "view-account")
        w.count(day, "sign_in_password")
        if upgrade == "button":
            visible(driver, "upgrade-button").click()
        if upgrade:
            wait(driver, 30).until(lambda d: len(passkey_names(d)) == 1)
            w.people[username] = driver.get_credentials()
            w.count(day, "upgrade_" + upgrade)
        if password_off:
            visible(driver, "password-section")
            driver.find_element(By.ID, "password-remove-button").click()
            wait(driver).until(lambda d: "password is off" in d.find_element(By.ID, "message").text)
            w.count(day, "password_off")
    finally:
        if grant:
            uninjected(driver, grant)


def passkey_sign_in(w, day, username, autofill=False):
    driver = w.browser
    if autofill:
        as_person(driver, w.people[username])
        driver.get(w.server.origin + "/")  # AutoFill offers the passkey; Chromium's automation takes it
        visible(driver, "view-account")
    else:
        as_person(driver, w.people[username])
        blocker = injected(driver, NO_AUTOFILL)
        try:
            driver.get(w.server.origin + "/")
            visible(driver, "view-signin")
            driver.find_element(By.ID, "signin-username").send_keys(username)
            driver.find_element(By.ID, "signin-button").click()
            visible(driver, "view-account")
        finally:
            uninjected(driver, blocker)
    assert f"Signed in as {username}" in message(driver)
    # The signature counter moved on: the next device to carry this passkey starts from here.
    w.people[username] = driver.get_credentials()
    w.count(day, "sign_in_autofill" if autofill else "sign_in_passkey")


def recovery_sign_in(w, day, username, new_passkey=True):
    """A recovery code (the device is lost), then a passkey from a new device."""
    driver = w.browser
    as_person(driver)
    driver.get(w.server.origin + "/#recover")
    visible(driver, "view-recover")
    driver.find_element(By.ID, "recover-username").send_keys(username)
    driver.find_element(By.ID, "recover-code").send_keys(w.codes[username].pop(0))
    driver.find_element(By.ID, "recover-button").click()
    visible(driver, "recovery-banner")
    w.count(day, "sign_in_recovery")
    if new_passkey:
        driver.add_virtual_authenticator(authenticator_options())
        count = len(passkey_names(driver))
        driver.find_element(By.ID, "recovery-passkey-button").click()
        wait(driver).until(lambda d: len(passkey_names(d)) == count + 1)
        w.people[username] = driver.get_credentials()  # the new device's (the lost one's is gone)
        w.count(day, "passkey_added")


def click_text(driver, text, root="//*[@id='view-page']"):
    button = wait(driver).until(EC.element_to_be_clickable((By.XPATH, f"{root}//button[normalize-space()={json.dumps(text)}]")))
    button.click()
    return button


def dialog(driver):
    return wait(driver).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))


def shown_secret(driver):
    """The secret a dialog shows once, and that dialog."""
    field = wait(driver, 20).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog[open] textarea.secret")))
    return field.get_attribute("value"), field.find_element(By.XPATH, "ancestor::dialog")


def dialog_facts(box):
    """A dialog's facts (its <dl>) as {term: value}."""
    return box.parent.execute_script(
        "return Object.fromEntries([...arguments[0].querySelectorAll('dl dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))", box)


def table_row(driver, caption, first_cell):
    """The row of the page's table named `caption` whose first cell is `first_cell`, as
    {column heading: cell text}; None when there is none."""
    return driver.execute_script("""
      const [caption, first] = arguments;
      const table = [...document.querySelectorAll('#view-page table')].find((t) => t.caption && t.caption.textContent.trim() === caption);
      if (!table) return null;
      const names = [...table.tHead.rows[0].cells].map((cell) => cell.textContent.trim());
      const row = [...table.tBodies[0].rows].find((r) => r.cells[0].textContent.trim() === first);
      return row ? Object.fromEntries([...row.cells].map((cell, i) => [names[i], cell.textContent.trim()])) : null;
    """, caption, first_cell)


def page_ready(driver, heading=None):
    wait(driver, 20).until(lambda d: d.execute_script(
        "const v = document.getElementById('view-page'); return !v.hidden && !v.hasAttribute('aria-busy') && !!v.querySelector('h1')"))
    if heading:
        wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, "#view-page h1").text == heading)
    assert_no_missing_values(driver)


# What a page shows when it reads a field the API does not send: JavaScript's words for "nothing".
MISSING = r"\bundefined\b|\bNaN\b|\[object Object\]|\bnull\b"


def assert_no_missing_values(driver):
    """No text, link or attribute of the page says 'undefined', 'NaN', 'null' or '[object Object]'."""
    found = driver.execute_script("""
      const missing = new RegExp(arguments[0]);
      const view = document.getElementById('view-page');
      const found = [];
      if (missing.test(view.textContent)) found.push(view.textContent.match(missing)[0] + ' in the text');
      for (const element of [view, ...view.querySelectorAll('*')]) {
        for (const attribute of element.attributes) {
          if (missing.test(attribute.value)) found.push(`${element.tagName} ${attribute.name}="${attribute.value}"`);
        }
      }
      return found;
    """, MISSING)
    assert found == [], (driver.current_url, found)


def go(driver, server, hash_, heading=None):
    driver.get(server.origin + PAGE + hash_)
    page_ready(driver, heading)


def console_sign_in(driver, server, credentials, screenshot_name=None):
    driver.add_virtual_authenticator(authenticator_options())
    for credential in credentials:
        driver.add_credential(credential)
    driver.get(server.origin + PAGE)
    visible(driver, "view-signin")
    if screenshot_name:
        screenshot(driver, screenshot_name, full=False)
    driver.find_element(By.ID, "signin-button").click()
    page_ready(driver, "Overview")


# MARK: the story

def test_bootstrap_link_makes_the_first_admin_once(world):
    w = world
    server = w.server
    first = today() - datetime.timedelta(days=3)
    w.first_day = first
    server.start(first)
    # The link is on standard error, with the token, at the first web origin.
    stderr = server.stderr()
    assert "passkeyd: no administrator yet. Open this link" in stderr
    link = next(word for word in stderr.split() if word.startswith(server.origin + "/admin/#bootstrap=pkb_"))

    w.admin = console_browser()
    admin = w.admin
    admin.add_virtual_authenticator(authenticator_options())
    admin.get(link)
    visible(admin, "view-bootstrap")
    # The token leaves the address bar at once.
    assert "pkb_" not in admin.current_url
    screenshot(admin, "console-bootstrap.png", full=False)
    admin.find_element(By.ID, "bootstrap-username").send_keys("root")
    admin.find_element(By.ID, "bootstrap-display-name").send_keys("Root Operator")
    admin.find_element(By.ID, "bootstrap-button").click()
    page_ready(admin, "Overview")
    assert "Root Operator (root)" in admin.find_element(By.ID, "who-name").text
    assert admin.find_element(By.ID, "who-role").get_attribute("textContent") == "admin"
    w.people["root"] = admin.get_credentials()
    # The console's own sign-up: in the totals (the account exists), not a sign-up.
    w.count(first, "admin_bootstrap")
    assert server.query("SELECT a.username, r.role FROM admin_roles r JOIN accounts a ON a.id = r.account_id") == [("root", "admin")]

    # The same link again, in a browser with no console session: refused.
    other = console_browser()
    try:
        other.add_virtual_authenticator(authenticator_options())
        other.get(link)
        visible(other, "view-bootstrap")
        other.find_element(By.ID, "bootstrap-username").send_keys("mallory")
        other.find_element(By.ID, "bootstrap-button").click()
        wait(other).until(lambda d: "bootstrap link is unknown, expired or was already used" in d.find_element(By.ID, "message").text)
        assert other.get_credentials() == []  # no passkey was made
    finally:
        other.quit()
    assert server.query("SELECT COUNT(*) FROM accounts WHERE username = 'mallory'") == [(0,)]
    assert server.query("SELECT COUNT(*) FROM admin_bootstrap WHERE used_at IS NOT NULL") == [(1,)]


def test_a_scripted_history_over_four_days(world):
    w = world
    server = w.server
    d3 = w.first_day
    d2, d1, d0 = d3 + datetime.timedelta(days=1), d3 + datetime.timedelta(days=2), today()
    w.days = [d3, d2, d1, d0]

    # Day −3 (the server started on it above): sign-ups with passkeys, imported passwords.
    sign_up(w, d3, "alice", "Alice Liddell")
    sign_up(w, d3, "bob", "Bob Viewer")
    import_passwords(w, d3, ["carol", "dave", "erin", "frank", "gina"])
    server.stop()

    # Day −2: an upgrade by the button and the password turned off, a password sign-in, a
    # passkey sign-in by the button, a sign-up.
    server.start(d2)
    password_sign_in(w, d2, "carol", upgrade="button", password_off=True)
    password_sign_in(w, d2, "dave")
    passkey_sign_in(w, d2, "alice")
    sign_up(w, d2, "hugo")
    server.stop()

    # Day −1: the browser's conditional create after a password, AutoFill, a recovery code and a
    # new passkey (alice has two from now on).
    server.start(d1)
    password_sign_in(w, d1, "erin", upgrade="conditional")
    passkey_sign_in(w, d1, "bob", autofill=True)
    recovery_sign_in(w, d1, "alice")
    password_sign_in(w, d1, "dave")
    server.stop()

    # Today, on the machine's clock.
    server.start()
    assert "no administrator yet" not in server.stderr()
    passkey_sign_in(w, d0, "alice")
    passkey_sign_in(w, d0, "hugo", autofill=True)
    password_sign_in(w, d0, "frank", upgrade="button")
    password_sign_in(w, d0, "dave")
    sign_up(w, d0, "ivy", EVIL)
    as_person(w.browser)

    # The audit lines carry the days the script lived through.
    for day in w.days:
        start = int(datetime.datetime.combine(day, datetime.time(), datetime.timezone.utc).timestamp() * 1000)
        lines = dict(server.query("SELECT metric, COUNT(*) FROM audit_events WHERE metric IS NOT NULL AND time >= ? AND time < ? GROUP BY metric",
                                  start, start + DAY))
        assert lines == w.expected.get(day.isoformat(), {}), day


def store_days(server, days):
    """The chart's numbers for `days` (dates), from the SQLite file: metrics per UTC day from the
    audit log (plus migration 13's baselines), totals as running sums of the transitions."""
    rows = server.query("SELECT time / ? * ?, metric, COUNT(*) FROM audit_events WHERE metric IS NOT NULL GROUP BY 1, 2", DAY, DAY)
    rows += server.query("SELECT day, metric, n FROM daily_metrics WHERE metric LIKE 'baseline_%'")
    by_day = {}
    for start, metric, n in rows:
        by_day.setdefault(datetime.datetime.fromtimestamp(start / 1000, datetime.timezone.utc).date(), {}).setdefault(metric, 0)
        by_day[datetime.datetime.fromtimestamp(start / 1000, datetime.timezone.utc).date()][metric] += n
    totals = [0, 0, 0]
    result = {}
    for day in sorted(set(by_day) | set(days)):
        metrics = by_day.get(day, {})
        for metric, n in metrics.items():
            for i, move in enumerate(TRANSITIONS.get(metric, (0, 0, 0))):
                totals[i] += move * n
        m = lambda name: metrics.get(name, 0)
        result[day.isoformat()] = {
            "accountsWithPasskey": totals[0], "passwordOnly": totals[1],
            "newPasskeys": sum(m(name) for name in NEW_PASSKEY),
            "upgrades": {"conditional": m("upgrade_conditional"), "button": m("upgrade_button"), "recovery": m("upgrade_recovery")},
            "passwordsOff": m("password_off"),
            "signIns": {"autofill": m("sign_in_autofill"), "passkey": m("sign_in_passkey"), "password": m("sign_in_password"),
                        "recovery": m("sign_in_recovery"), "oidc": m("sign_in_oidc")},
        }
    return result


def chart_tables(driver):
    """The three charts' tables behind the SVGs: [[[cell text…] per row] per chart]."""
    return driver.execute_script("""
      return [...document.querySelectorAll('#view-page details.chart-data table')].map((table) =>
        [...table.tBodies[0].rows].map((row) => [...row.cells].map((cell) => cell.textContent.trim())));
    """)


def check_overview_against_the_store(w):
    admin, server = w.admin, w.server
    go(admin, server, "#/overview?days=7", "Overview")
    api = fetch(admin, "GET", "/admin/api/adoption?days=7")
    assert api["status"] == 200, api
    days = api["json"]["days"]
    assert len(days) == 7 and days[-1]["date"] == today().isoformat()
    store = store_days(server, [datetime.date.fromisoformat(day["date"]) for day in days])
    accounts_with_passkey = server.query("SELECT COUNT(*) FROM accounts a WHERE EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)")[0][0]
    password_only = server.query("SELECT COUNT(*) FROM accounts a WHERE a.password_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)")[0][0]
    accounts = server.query("SELECT COUNT(*) FROM accounts")[0][0]
    # Today's totals are the accounts table's.
    assert days[-1]["accountsWithPasskey"] == accounts_with_passkey
    assert days[-1]["passwordOnly"] == password_only
    tables = chart_tables(admin)
    assert [len(table) for table in tables] == [7, 7, 7]
    for index, day in enumerate(days):
        mine = store[day["date"]]
        for key in ("accountsWithPasskey", "passwordOnly", "newPasskeys", "passwordsOff"):
            assert day[key] == mine[key], (day["date"], key)
        assert day["upgrades"] == mine["upgrades"], day["date"]
        assert day["signIns"] == mine["signIns"], day["date"]
        # What the script did that day (independent of how the server counts).
        did = w.expected.get(day["date"], {})
        assert day["signIns"] == {"autofill": did.get("sign_in_autofill", 0), "passkey": did.get("sign_in_passkey", 0),
                                  "password": did.get("sign_in_password", 0), "recovery": did.get("sign_in_recovery", 0), "oidc": 0}, day["date"]
        assert day["upgrades"] == {"conditional": did.get("upgrade_conditional", 0), "button": did.get("upgrade_button", 0),
                                   "recovery": did.get("upgrade_recovery", 0)}, day["date"]
        assert day["newPasskeys"] == sum(did.get(name, 0) for name in NEW_PASSKEY), day["date"]
        # The page's tables: adoption (with passkey, password-only), sign-ins (5 methods),
        # growth (3 upgrade roads, new passkeys, passwords off).
        adoption, sign_ins, growth = tables[0][index], tables[1][index], tables[2][index]
        assert [int(x) for x in adoption[1:]] == [day["accountsWithPasskey"], day["passwordOnly"]]
        assert [int(x) for x in sign_ins[1:]] == [day["signIns"][m] for m in ("autofill", "passkey", "password", "recovery", "oidc")]
        assert [int(x) for x in growth[1:]] == [day["upgrades"]["conditional"], day["upgrades"]["button"], day["upgrades"]["recovery"],
                                               day["newPasskeys"], day["passwordsOff"]]
    # The counts at the top and today's sign-ins.
    overview = fetch(admin, "GET", "/admin/api/overview")["json"]
    assert (overview["accounts"], overview["accountsWithPasskey"], overview["passwordOnly"]) == (accounts, accounts_with_passkey, password_only)
    assert overview["signInsToday"] == days[-1]["signIns"]
    stats = admin.execute_script("return [...document.querySelectorAll('#view-page dl.stats:not(.small) .stat-value')].map(e => e.textContent)")
    assert [int(x) for x in stats[:3]] == [accounts, accounts_with_passkey, password_only]
    today_stats = admin.execute_script("return [...document.querySelectorAll('#view-page dl.stats.small .stat-value')].map(e => e.textContent)")
    assert [int(x) for x in today_stats] == [days[-1]["signIns"][m] for m in ("autofill", "passkey", "password", "recovery", "oidc")]
    # The CSV download has the same numbers.
    csv = fetch(admin, "GET", "/admin/api/adoption.csv?days=7")
    assert csv["status"] == 200 and csv["headers"]["content-type"].startswith("text/csv")
    lines = csv["text"].strip().split("\r\n")
    assert len(lines) == 8
    last = lines[-1].split(",")
    assert last[0] == today().isoformat() and int(last[1]) == accounts_with_passkey and int(last[2]) == password_only
    return days


def test_the_overview_chart_matches_the_store(world):
    w = world
    admin = w.admin
    # The bootstrap's console session was on day −3: long gone (8 h). Sign in again.
    admin.delete_all_cookies()
    admin.remove_virtual_authenticator()
    console_sign_in(admin, w.server, w.people["root"], "console-signin.png")
    days = check_overview_against_the_store(w)
    # The story in numbers: day −3: the first admin (root), 2 sign-ups (alice, bob) + 5 imports; …
    assert [(d["accountsWithPasskey"], d["passwordOnly"]) for d in days[-4:]] == [(3, 5), (5, 4), (6, 3), (8, 2)]
    # root is in the totals but is no new passkey: the console's own sign-up is not one.
    assert days[-4]["newPasskeys"] == 2
    assert sum(d["signIns"]["password"] for d in days) == 6
    admin.execute_script("document.querySelectorAll('#view-page details.chart-data')[0].open = true")
    screenshot(admin, "console-overview.png")
    admin.execute_script("document.querySelectorAll('#view-page details.chart-data')[0].open = false")


def test_an_admin_grants_a_viewer_finds_an_account_and_changes_it(world):
    w = world
    admin, server = w.admin, w.server

    # Grant bob the viewer role from the Admins page.
    go(admin, server, "#/admins", "Admins")
    field = admin.find_element(By.CSS_SELECTOR, "#view-page form.add-form input[name=account]")
    field.send_keys("bob")
    assert admin.find_element(By.CSS_SELECTOR, "#view-page form.add-form select").get_attribute("value") == "viewer"
    signatures = admin.get_credentials()[0].sign_count
    time.sleep(11)  # the step-up window (PASSKEYD_ADMIN_STEP_UP=10) has passed: a change asks for the passkey again
    click_text(admin, "Grant")
    wait(admin, 20).until(lambda d: "bob" in d.find_element(By.CSS_SELECTOR, "#view-page table").text)
    assert admin.get_credentials()[0].sign_count > signatures, "no step-up assertion"
    assert ("bob", "viewer") in server.query("SELECT a.username, r.role FROM admin_roles r JOIN accounts a ON a.id = r.account_id")

    # Find alice on the Accounts page (a prefix, any case).
    go(admin, server, "#/accounts", "Accounts")
    search = admin.find_element(By.CSS_SELECTOR, "#view-page form.search input[name=q]")
    search.send_keys("ALI")
    click_text(admin, "Search")
    link = wait(admin).until(EC.element_to_be_clickable((By.XPATH, "//*[@id='view-page']//table//a[normalize-space()='alice']")))
    rows = admin.find_elements(By.CSS_SELECTOR, "#view-page table tbody tr")
    assert len(rows) == 1
    screenshot(admin, "console-accounts.png")
    link.click()
    page_ready(admin, "Alice Liddell (alice)")
    alice = server.query("SELECT id FROM accounts WHERE username = 'alice'")[0][0]
    assert alice.lower() in admin.current_url.lower()
    assert len(admin.find_elements(By.CSS_SELECTOR, "#view-page table")[0].find_elements(By.CSS_SELECTOR, "tbody tr")) == 2
    screenshot(admin, "console-account.png")

    # Remove one of her two passkeys.
    removes = admin.find_elements(By.XPATH, "//*[@id='view-page']//button[normalize-space()='Remove']")
    assert len(removes) == 2
    removes[0].click()
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    wait(admin, 20).until(lambda d: "was removed" in d.find_element(By.ID, "message").text)
    page_ready(admin)
    assert len(admin.find_elements(By.XPATH, "//*[@id='view-page']//button[normalize-space()='Remove']")) == 1
    assert server.query("SELECT COUNT(*) FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE a.username = 'alice'") == [(1,)]

    # A recovery link: the reason is mandatory (in the dialog, and at the API).
    click_text(admin, "Issue a recovery link")
    box = dialog(admin)
    box.find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    assert "is required" in box.find_element(By.CSS_SELECTOR, ".message.error").text
    csrf = fetch(admin, "GET", "/admin/api/session")["json"]["csrfToken"]
    refused = fetch(admin, "POST", f"/admin/api/accounts/{alice}/recovery-link", {"reason": ""}, {"X-CSRF-Token": csrf})
    assert (refused["status"], error_code(refused)) == (400, "reason_required"), refused
    box.find_element(By.CSS_SELECTOR, "textarea").send_keys("Lost her phone; called the help desk (ticket 4711)")
    box.find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    secret = wait(admin).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog[open] textarea.secret")))
    link = secret.get_attribute("value")
    assert link.startswith(server.origin + "/#recover=")
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    page_ready(admin)
    # Shown once: the page holds it no more.
    assert link not in admin.page_source
    assert server.query("SELECT COUNT(*) FROM audit_events WHERE kind = 'admin_recovery_link'") == [(1,)]
    # The link signs alice in (a recovery sign-in today).
    as_person(w.browser)
    w.browser.get(link)
    visible(w.browser, "recovery-banner")
    w.count(today(), "sign_in_recovery")
    as_person(w.browser)

    # An OpenID Connect client (Integrations): added, its id shown where the page shows it, a new
    # secret, then removed, each through the page's own buttons.
    go(admin, server, "#/integrations", "Integrations")
    client_form = admin.find_element(By.XPATH, "//*[@id='view-page']//form[.//h3[normalize-space()='Add a client']]")
    client_form.find_element(By.CSS_SELECTOR, "input[name=name]").send_keys("Shop")
    client_form.find_element(By.CSS_SELECTOR, "textarea[name=redirectUris]").send_keys("https://shop.example/callback")
    click_text(admin, "Add the client")
    first, box = shown_secret(admin)
    [(client_id, stored)] = server.query("SELECT id, secret_hash FROM oauth_clients WHERE name = 'Shop'")
    assert client_id.startswith("pkc_") and first.startswith("pcs_") and stored == hashlib.sha256(first.encode()).digest()
    assert dialog_facts(box) == {"Client id": client_id}
    box.find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    page_ready(admin)
    clients = "//*[@id='view-page']//table[caption[normalize-space()='OpenID Connect clients']]"
    row = wait(admin).until(lambda d: table_row(d, "OpenID Connect clients", "Shop"))
    assert row["Client id"] == client_id, row
    click_text(admin, "New secret", clients)
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    second, box = shown_secret(admin)
    assert second.startswith("pcs_") and second != first
    assert dialog_facts(box) == {"Client id": client_id}
    box.find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    assert server.query("SELECT secret_hash FROM oauth_clients WHERE id = ?", client_id) == [(hashlib.sha256(second.encode()).digest(),)]
    assert server.query("SELECT detail FROM audit_events WHERE kind = 'oauth_client_secret_rotated'") == [(client_id,)]
    click_text(admin, "Remove", clients)
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    wait(admin, 20).until(lambda d: "The client Shop was removed." in d.find_element(By.ID, "message").text)
    page_ready(admin)
    assert table_row(admin, "OpenID Connect clients", "Shop") is None
    assert server.query("SELECT COUNT(*) FROM oauth_clients") == [(0,)]
    assert server.query("SELECT detail FROM audit_events WHERE kind = 'oauth_client_removed'") == [(client_id,)]

    # A webhook, then a new secret for it (Integrations).
    go(admin, server, "#/integrations", "Integrations")
    admin.find_element(By.CSS_SELECTOR, "#view-page input[name=url]").send_keys(f"http://127.0.0.1:{w.receiver.port}/hook")
    click_text(admin, "Add the webhook")
    first = wait(admin, 20).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog[open] textarea.secret"))).get_attribute("value")
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    page_ready(admin)
    wait(admin).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#view-page article.hook")) == 1)
    click_text(admin, "New secret")
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    second = wait(admin, 20).until(EC.visibility_of_element_located((By.CSS_SELECTOR, "dialog[open] textarea.secret"))).get_attribute("value")
    assert second and first and second != first
    dialog(admin).find_element(By.CSS_SELECTOR, "button[value=ok]").click()
    # An event for the webhook (a sign-in), delivered to the receiver.
    passkey_sign_in(w, today(), "bob")
    as_person(w.browser)
    deadline = time.time() + 30
    while not w.receiver.bodies and time.time() < deadline:
        time.sleep(0.5)
    assert w.receiver.bodies, "no webhook delivery"
    time.sleep(1)
    go(admin, server, "#/integrations", "Integrations")
    screenshot(admin, "console-integrations.png")

    go(admin, server, "#/audit", "Audit")
    kinds = admin.execute_script("return [...document.querySelectorAll('#view-page table tbody tr td code.muted')].map(e => e.textContent)")
    assert "admin_recovery_link" in kinds and "admin_passkey_revoked" in kinds, kinds
    screenshot(admin, "console-audit.png")
    go(admin, server, "#/policy", "Policy and metadata")
    screenshot(admin, "console-policy.png")

    # The numbers still match the store after the console's changes.
    check_overview_against_the_store(w)


CHANGES = [
    ("POST", "/admin/api/accounts/{alice}/disable", {}),
    ("POST", "/admin/api/accounts/{alice}/revoke-sessions", {}),
    ("POST", "/admin/api/accounts/{alice}/recovery-link", {"reason": "viewer tries"}),
    ("DELETE", "/admin/api/accounts/{alice}/passkeys/AAAA", {}),
    ("DELETE", "/admin/api/accounts/{alice}", {"confirm": "alice"}),
    ("POST", "/admin/api/admins", {"account": "bob", "role": "admin"}),
    ("POST", "/admin/api/webhooks", {"url": "http://127.0.0.1:9/x", "events": ["*"]}),
    ("POST", "/admin/api/api-keys", {"name": "k", "scopes": ["introspect"]}),
    ("POST", "/admin/api/signing-keys/rotate", {}),
]


def test_the_viewer_sees_and_changes_nothing(world):
    w = world
    server = w.server
    w.viewer = console_browser()
    viewer = w.viewer
    console_sign_in(viewer, server, w.people["bob"])
    assert viewer.find_element(By.ID, "who-role").get_attribute("textContent") == "viewer"
    alice = server.query("SELECT id FROM accounts WHERE username = 'alice'")[0][0]
    for hash_, heading in (("#/overview", "Overview"), ("#/accounts?q=a", "Accounts"), (f"#/accounts/{alice}", "Alice Liddell (alice)"),
                           ("#/audit", "Audit"), ("#/integrations", "Integrations"), ("#/policy", "Policy and metadata"), ("#/admins", "Admins")):
        go(viewer, server, hash_, heading)
        # The search's and the audit filter's own buttons are the only ones (they change nothing);
        # read once the page's parts have drawn (a table may come after the heading).
        allowed = {"#/accounts?q=a": ["Search"], "#/audit": ["Apply"]}.get(hash_, [])
        def buttons(d):
            return d.execute_script("return [...document.querySelectorAll('#view-page button')].map(b => b.textContent.trim())")
        try:
            wait(viewer, 10).until(lambda d: buttons(d) == allowed)
        except Exception:
            pass
        assert buttons(viewer) == allowed, (hash_, buttons(viewer))
        assert viewer.find_elements(By.CSS_SELECTOR, "#view-page form.add-form, #view-page .actions") == [], hash_
        if hash_ == "#/integrations":
            assert len(viewer.find_elements(By.CSS_SELECTOR, "#view-page article.hook")) == 1
    go(viewer, server, "#/overview", "Overview")
    screenshot(viewer, "console-viewer.png")

    csrf = fetch(viewer, "GET", "/admin/api/session")["json"]["csrfToken"]
    for method, path, body in CHANGES:
        answer = fetch(viewer, method, path.format(alice=alice), body, {"X-CSRF-Token": csrf})
        assert (answer["status"], error_code(answer)) == (403, "admin_role_required"), (method, path, answer)
    assert server.query("SELECT disabled FROM accounts WHERE username = 'alice'") == [(0,)]
    assert server.query("SELECT role FROM admin_roles r JOIN accounts a ON a.id = r.account_id WHERE a.username = 'bob'") == [("viewer",)]


def test_attacks_in_the_browser(world):
    w = world
    server, browser, admin = w.server, w.browser, w.admin

    # An ordinary account signed in at / cannot read the console's API.
    passkey_sign_in(w, today(), "hugo")
    for path in ("/admin/api/overview", "/admin/api/accounts?q=a", "/admin/api/session", "/admin/api/admins"):
        answer = fetch(browser, "GET", path)
        assert (answer["status"], error_code(answer)) == (403, "admin_required"), (path, answer)
    # The console page itself shows the sign-in, not a page.
    browser.get(server.origin + PAGE)
    visible(browser, "view-signin")
    as_person(browser)

    # The console's CSP has no 'unsafe-inline', and no page of the admin's run broke it.
    page = fetch(admin, "GET", PAGE)
    csp = page["headers"]["content-security-policy"]
    assert "unsafe-inline" not in csp and "script-src 'self'" in csp, csp
    for hash_ in ("#/overview", "#/accounts?q=a", "#/audit", "#/integrations", "#/policy", "#/admins"):
        go(admin, server, hash_)
        assert admin.execute_script("return window.__csp") == [], hash_
    # (Network lines are the refusals this module asks for on purpose, and /favicon.ico.)
    problems = [entry for entry in admin.get_log("browser")
                if "Content Security Policy" in entry["message"] or (entry["level"] == "SEVERE" and entry["source"] != "network")]
    assert problems == [], problems

    # A display name with markup is text in the accounts list (and the search for it too).
    go(admin, server, "#/accounts?q=ivy", "Accounts")
    assert EVIL in admin.find_element(By.CSS_SELECTOR, "#view-page table").text
    assert admin.find_elements(By.CSS_SELECTOR, "#view-page img") == []
    assert admin.execute_script("return window.__xss") is None
    # SQL in the search is a search text like any other.
    answer = fetch(admin, "GET", "/admin/api/accounts?" + urllib.parse.urlencode({"q": "a' OR '1'='1", "by": "username"}))
    assert answer["status"] == 200 and answer["json"]["accounts"] == [], answer
    answer = fetch(admin, "GET", "/admin/api/accounts?" + urllib.parse.urlencode({"q": "x" * 129}))
    assert (answer["status"], error_code(answer)) == (400, "invalid_query"), answer


def test_no_horizontal_scrolling_at_375_px(world):
    w = world
    admin, server = w.admin, w.server
    alice = server.query("SELECT id FROM accounts WHERE username = 'alice'")[0][0]
    admin.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    try:
        for hash_ in ("#/overview", "#/accounts?q=a", f"#/accounts/{alice}", "#/audit", "#/integrations", "#/policy", "#/admins"):
            go(admin, server, hash_)
            time.sleep(0.3)
            width = admin.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert width[1] == 375 and width[0] <= 375, (hash_, width)
        go(admin, server, "#/overview", "Overview")
        time.sleep(0.4)
        admin.save_screenshot(str(SCREENSHOTS / "console-overview-375.png"))
    finally:
        admin.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_console_in_french(world):
    w = world
    admin, server = w.admin, w.server
    admin.get(server.origin + PAGE + "?lang=fr#/overview")
    page_ready(admin, "Vue d'ensemble")
    assert admin.execute_script("return document.documentElement.lang") == "fr"
    nav = admin.find_element(By.ID, "nav").text
    assert "Comptes" in nav and "Vue d'ensemble" in nav
    assert admin.find_element(By.ID, "who-role").get_attribute("textContent") == "administrateur"
    summary = admin.find_element(By.CSS_SELECTOR, "#view-page details.chart-data summary").get_attribute("textContent")
    assert summary == "Afficher les données sous forme de tableau"
    go(admin, server, "?lang=fr#/accounts?q=alice", "Comptes")
    assert admin.find_element(By.XPATH, "//*[@id='view-page']//button[normalize-space()='Chercher']")


def test_a_search_for_markup_finds_it_as_text(world):
    w = world
    admin, server = w.admin, w.server
    answer = fetch(admin, "GET", "/admin/api/accounts?" + urllib.parse.urlencode({"q": EVIL, "by": "displayName"}))
    assert answer["status"] == 200 and [a["username"] for a in answer["json"]["accounts"]] == ["ivy"], answer
    go(admin, server, "#/accounts?" + urllib.parse.urlencode({"q": EVIL, "by": "displayName"}), "Accounts")
    assert "ivy" in admin.find_element(By.CSS_SELECTOR, "#view-page table").text
    assert EVIL in admin.find_element(By.CSS_SELECTOR, "#view-page table caption").text
    assert admin.find_elements(By.CSS_SELECTOR, "#view-page img") == []
    assert admin.execute_script("return window.__xss") is None


# The AAGUID of Chromium's virtual authenticators.
CHROMIUM_AAGUID = "01020304-0506-0708-0102-030405060708"


def metadata_blob(directory, number, next_update, entries):
    """A FIDO MDS3 BLOB signed by a throwaway MDS: its root (PEM file path) and the BLOB (JWS
    file path). The signing certificate is issued to mds.fidoalliance.org, as the server expects."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from cryptography.x509.oid import NameOID

    def b64url(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def certificate(subject, issuer, key, signer, extensions):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(datetime.datetime(2020, 1, 1))
                   .not_valid_after(datetime.datetime(2049, 1, 1)))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signer, hashes.SHA256())

    usage = dict(content_commitment=False, key_encipherment=False, data_encipherment=False, key_agreement=False,
                 encipher_only=False, decipher_only=False)
    root_key, signing_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "passkeyd e2e MDS Root")])
    root = certificate(root_name, root_name, root_key, root_key, [
        (x509.BasicConstraints(ca=True, path_length=None), True),
        (x509.KeyUsage(digital_signature=False, key_cert_sign=True, crl_sign=True, **usage), True),
    ])
    signer = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mds.fidoalliance.org")]), root_name, signing_key, root_key, [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, **usage), True),
        (x509.SubjectAlternativeName([x509.DNSName("mds.fidoalliance.org")]), False),
    ])
    header = {"alg": "ES256", "typ": "JWT", "x5c": [base64.b64encode(signer.public_bytes(serialization.Encoding.DER)).decode()]}
    payload = {"legalHeader": "Test metadata: not for production.", "no": number, "nextUpdate": next_update, "entries": [
        {"aaguid": aaguid, "metadataStatement": {"description": description, "attestationRootCertificates": []},
         "statusReports": [{"status": "FIDO_CERTIFIED", "effectiveDate": "2024-01-01"}], "timeOfLastStatusChange": "2024-01-01"}
        for aaguid, description in entries]}
    signed = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    r, s = decode_dss_signature(signing_key.sign(signed.encode(), ec.ECDSA(hashes.SHA256())))
    root_path, blob_path = os.path.join(directory, "mds-root.pem"), os.path.join(directory, "blob.jwt")
    pathlib.Path(root_path).write_bytes(root.public_bytes(serialization.Encoding.PEM))
    pathlib.Path(blob_path).write_text(signed + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
    return root_path, blob_path


def facts_of(driver, heading):
    """The facts (<dl>) of the page's section headed `heading`, as {term: value}."""
    return driver.execute_script("""
      const section = [...document.querySelectorAll('#view-page section')].find((s) => s.querySelector('h2')?.textContent.trim() === arguments[0]);
      return section ? Object.fromEntries([...section.querySelectorAll('dl dt')].map((dt) => [dt.textContent.trim(), dt.nextElementSibling.textContent.trim()])) : null;
    """, heading)


def test_the_policy_page_shows_the_metadata_blob_in_force(world):
    w = world
    admin, server = w.admin, w.server
    go(admin, server, "#/policy", "Policy and metadata")
    assert "No metadata BLOB is loaded." in admin.find_element(By.ID, "view-page").text
    # A BLOB imported with `passkeyd mds import`, and the server started with its MDS root.
    # (Its entry names the AAGUID of Chromium's virtual authenticators, which made every passkey here.)
    root, blob = metadata_blob(server.directory, 7, "2049-01-01", [(CHROMIUM_AAGUID, "Chromium virtual authenticator")])
    imported = server.passkeyd("mds", "import", blob, "--root", root)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "imported FIDO metadata BLOB no. 7: 1 entries, next update 2049-01-01" in imported.stdout
    server.stop()
    server.settings["PASSKEYD_MDS_ROOT_CERTIFICATE"] = root
    try:
        server.start()
        # The admin's passkey as it is now (its signature counter moved on with every step-up).
        credentials = admin.get_credentials()
        admin.delete_all_cookies()
        admin.remove_virtual_authenticator()
        console_sign_in(admin, server, credentials)
        go(admin, server, "#/policy", "Policy and metadata")
        facts = facts_of(admin, "FIDO Metadata Service")
        assert facts is not None and facts["BLOB number"] == "7" and facts["Next update"] == "2049-01-01" and facts["Entries"] == "1", facts
        assert set(facts) == {"BLOB number", "Next update", "Entries", "Imported", "In force here since"}, facts
        # Both moments as dates (today's), not "—" or "Never".
        for term in ("Imported", "In force here since"):
            assert str(today().year) in facts[term], facts
        policy = fetch(admin, "GET", "/admin/api/policy")["json"]["metadata"]
        assert set(policy) == {"number", "nextUpdate", "entries", "importedAt", "loadedAt"}, policy
        # The providers are named by the metadata now.
        assert table_row(admin, "Passkey providers by AAGUID, most used first", "Chromium virtual authenticator")["AAGUID"] == CHROMIUM_AAGUID
        screenshot(admin, "console-policy.png")
    finally:
        server.stop()
        server.settings.pop("PASSKEYD_MDS_ROOT_CERTIFICATE")
        server.start()
