"""The hardened edge as a browser meets it: reauthentication before a sensitive action, the list
of sessions, and a cross-site form that tries to sign the browser in (login CSRF)."""
import time

import pytest
from selenium.webdriver.common.by import By

from conftest import Server, authenticator_options, free_port, serve_page
from test_web import sign_up, visible, wait


@pytest.fixture(scope="module")
def reauth_server():
    """Sensitive actions need a sign-in within the last 10 seconds."""
    s = Server(PASSKEYD_REAUTHENTICATION_SECONDS="10")
    yield s
    s.stop()


def test_a_stale_session_confirms_with_a_passkey_first(reauth_server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, reauth_server, "rhea")
    sessions = browser.find_element(By.ID, "session-list").text
    assert "This browser" in sessions and "sign-up" in sessions
    time.sleep(11)
    # New recovery codes need a recent sign-in: the page asks the passkey again, then goes on.
    browser.find_element(By.ID, "recovery-codes-button").click()
    visible(browser, "recovery-codes")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#recovery-codes-list li")) == 10)
    # The confirming sign-in replaced the old session: still one, made by a passkey.
    browser.refresh()
    visible(browser, "view-account")
    wait(browser).until(lambda d: "signed in with passkey" in d.find_element(By.ID, "session-list").text)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#session-list li")) == 1


def test_a_cross_site_form_cannot_sign_the_browser_in(server, browser):
    port = free_port()
    page = f"""<!doctype html><form id="f" method="POST" enctype="text/plain" action="{server.origin}/api/auth/password/sign-in">
<input name='{{"username":"mallory","password":"' value='x"}}'></form><script>document.getElementById('f').submit()</script>"""
    attacker = serve_page(page, port)
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        wait(browser).until(lambda d: "error" in d.page_source and d.current_url.startswith(server.origin))
        assert "csrf_origin_mismatch" in browser.page_source or "unsupported_media_type" in browser.page_source
        assert not browser.get_cookies()
    finally:
        attacker.shutdown()


def test_upgrading_reports_usernames_that_now_collide_without_merging(tmp_path):
    """A database made before PRECIS keys: two accounts whose names differ only in width.
    Migration 5 re-keys what it can and reports the collision; both accounts stay."""
    import os
    import sqlite3
    import subprocess
    import uuid
    from conftest import ROOT
    binary = os.environ.get("PASSKEYD_BINARY") or str(ROOT / ".build" / "debug" / "passkeyd")
    database = tmp_path / "old.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "PASSKEYD_CONFIG"}
    run = lambda: subprocess.run([binary, "migrate", "--database", f"sqlite://{database}"], env=env, capture_output=True, text=True, timeout=60)
    assert run().returncode == 0
    # Back to version 4, with the keys version 4 made (lower-cased, nothing else).
    db = sqlite3.connect(database)
    db.executescript("""
        DROP INDEX IF EXISTS sessions_credential;
        ALTER TABLE sessions DROP COLUMN credential_id;
        ALTER TABLE sessions DROP COLUMN method;
        DELETE FROM schema_migrations WHERE version = 5;
    """)
    rows = [("ada", "ada"), ("ＡＤＡ", "ａｄａ"), ("Ｂｅｎ", "ｂｅｎ")]
    for name, key in rows:
        db.execute("INSERT INTO accounts (tenant_id, id, username, username_key, display_name, user_handle, created_at) "
                   "VALUES ('default', ?, ?, ?, ?, ?, 0)",
                   (str(uuid.uuid4()).upper(), name, key, name, os.urandom(64)))
    db.commit()
    db.close()
    upgraded = run()
    assert upgraded.returncode == 0, upgraded.stderr
    assert "username collision" in upgraded.stderr and "ＡＤＡ" in upgraded.stderr, upgraded.stderr
    db = sqlite3.connect(database)
    keys = dict(db.execute("SELECT username, username_key FROM accounts").fetchall())
    assert keys == {"ada": "ada", "ＡＤＡ": "ａｄａ", "Ｂｅｎ": "ben"}  # re-keyed where free, never merged
    assert db.execute("SELECT COUNT(*) FROM accounts").fetchone()[0] == 3


def test_a_corrupt_row_is_refused_not_read_with_an_invented_id(tmp_path):
    """A row whose ID is not a UUID: the store says so (corrupt_row), it never makes one up."""
    import os
    import sqlite3
    import subprocess
    from conftest import ROOT
    binary = os.environ.get("PASSKEYD_BINARY") or str(ROOT / ".build" / "debug" / "passkeyd")
    database = tmp_path / "corrupt.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "PASSKEYD_CONFIG"}
    passkeyd = lambda *args: subprocess.run([binary, *args, "--database", f"sqlite://{database}"], env=env, capture_output=True, text=True, timeout=60)
    assert passkeyd("migrate").returncode == 0
    db = sqlite3.connect(database)
    db.execute("INSERT INTO accounts (tenant_id, id, username, username_key, display_name, user_handle, created_at) "
               "VALUES ('default', 'not-a-uuid', 'zed', 'zed', 'Zed', x'01', 0)")
    db.commit()
    db.close()
    listed = passkeyd("admin", "accounts")
    assert listed.returncode != 0 and "corrupt_row" in listed.stderr, (listed.returncode, listed.stdout, listed.stderr)
