"""Tenants in real Chromium (issue 44): one passkeyd serving a.localhost and b.localhost (Chromium
resolves localhost names to the loopback address), each its own relying party. The web UI signs
the same username up on both, each passkey for its own RP ID; a session of one host is nobody on
the other; each tenant's console makes its own first administrator, who sees only its tenant."""
import json
import time
import urllib.error
import urllib.request

import pytest
from selenium.webdriver.common.by import By

from conftest import Server, authenticator_options, chrome
from test_web import attach, message, sign_out, visible, wait


def get(port, host, path):
    """A GET on this server naming `host` (urllib sends the Host it is given)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": f"{host}:{port}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture(scope="module")
def tenants():
    server = Server()
    for name, host in (("alpha", "a.localhost"), ("beta", "b.localhost")):
        added = server.passkeyd("tenant", "add", name, "--host", host, "--rp-id", host, "--origin", f"http://{host}:{server.port}",
                                "--rp-name", name.capitalize())
        assert added.returncode == 0, added.stderr
    # Served within the registry's poll (2 s); waited for at most 20 s. Until then every host is
    # the default tenant's (a server without tenants): b's document names b once b is served.
    for _ in range(200):
        if b"b.localhost" in get(server.port, "b.localhost", "/.well-known/webauthn")[1]:
            break
        time.sleep(0.1)
    yield server
    server.stop()


def origin(server, host):
    return f"http://{host}:{server.port}"


def sign_up_at(driver, base, username):
    driver.get(base + "/#signup")
    visible(driver, "view-signup")
    driver.find_element(By.ID, "signup-username").send_keys(username)
    driver.find_element(By.ID, "signup-button").click()
    try:
        visible(driver, "view-account")
    except Exception:
        raise AssertionError(f"no account view at {base}: {driver.find_element(By.ID, 'message').text}")


def test_one_username_signs_up_on_two_hosts_as_two_accounts(tenants):
    driver = chrome()
    try:
        driver.add_virtual_authenticator(authenticator_options())
        sign_up_at(driver, origin(tenants, "a.localhost"), "sam")
        sign_up_at(driver, origin(tenants, "b.localhost"), "sam")
        credentials = driver.get_credentials()
        assert sorted(c.rp_id for c in credentials) == ["a.localhost", "b.localhost"]

        # Each host's session is its own: signed in on b, signed out on a leaves b signed in.
        driver.get(origin(tenants, "a.localhost") + "/#account")
        visible(driver, "view-account")
        sign_out(driver)
        driver.get(origin(tenants, "b.localhost") + "/#account")
        visible(driver, "view-account")
        driver.get(origin(tenants, "a.localhost") + "/#account")
        visible(driver, "view-signin")

        # Each tenant has one sam; the default tenant none.
        for tenant, count in (("alpha", 1), ("beta", 1)):
            shown = json.loads(tenants.passkeyd("tenant", "show", tenant).stdout)
            assert shown["accounts"] == count
        listed = tenants.passkeyd("admin", "accounts")
        assert "sam" not in listed.stdout

        # Signing in again on a, username first, with its own passkey (the authenticator holds both).
        attach(driver, credentials)
        driver.find_element(By.ID, "signin-username").send_keys("sam")
        driver.find_element(By.ID, "signin-button").click()
        visible(driver, "view-account")
        assert "Signed in as sam" in message(driver)
    finally:
        driver.quit()


def test_a_host_that_is_no_tenants_answers_unknown_tenant(tenants):
    status, body = get(tenants.port, "nowhere.localhost", "/")
    assert status == 404 and json.loads(body) == {
        "error": {"code": "unknown_tenant", "message": "No service is configured for this host."}}
    driver = chrome()
    try:
        driver.get(origin(tenants, "nowhere.localhost") + "/")
        assert "unknown_tenant" in driver.page_source
    finally:
        driver.quit()


def test_each_tenants_console_makes_its_own_first_administrator(tenants):
    made = tenants.passkeyd("admin", "bootstrap-link", "--tenant", "alpha")
    assert made.returncode == 0, made.stderr
    link = made.stdout.strip()
    assert link.startswith(origin(tenants, "a.localhost") + "/admin/#bootstrap=pkb_"), link
    # The same token on b's host is no token there.
    driver = chrome()
    try:
        driver.add_virtual_authenticator(authenticator_options())
        driver.get(link.replace("a.localhost", "b.localhost"))
        visible(driver, "view-bootstrap")
        driver.find_element(By.ID, "bootstrap-username").send_keys("mallory")
        driver.find_element(By.ID, "bootstrap-button").click()
        wait(driver).until(lambda d: "bootstrap link is unknown, expired or was already used" in d.find_element(By.ID, "message").text)
        assert driver.get_credentials() == []
        # On a's host it makes a's administrator.
        driver.get(link)
        visible(driver, "view-bootstrap")
        driver.find_element(By.ID, "bootstrap-username").send_keys("root")
        driver.find_element(By.ID, "bootstrap-button").click()
        wait(driver, 30).until(lambda d: "root" in d.find_element(By.ID, "who-name").text)
        roles = tenants.passkeyd("admin", "roles", "--tenant", "alpha")
        assert "root" in roles.stdout, roles.stdout + roles.stderr
        assert "root" not in tenants.passkeyd("admin", "roles", "--tenant", "beta").stdout
        assert "root" not in tenants.passkeyd("admin", "roles").stdout
    finally:
        driver.quit()


def test_a_server_operator_adds_a_tenant_in_the_console_and_an_admin_sees_no_tenants(tenants):
    """The default tenant's console: its first administrator (bootstrap), made a server operator
    on the command line, signs in again, sees Tenants and adds one through the form; the new
    host is served. A tenant's own administrator's console has no Tenants."""
    made = tenants.passkeyd("admin", "bootstrap-link")
    assert made.returncode == 0, made.stderr
    link = made.stdout.strip()
    home = origin(tenants, "localhost")
    assert link.startswith(home + "/admin/#bootstrap=pkb_"), link
    driver = chrome()
    try:
        driver.add_virtual_authenticator(authenticator_options())
        driver.get(link)
        visible(driver, "view-bootstrap")
        driver.find_element(By.ID, "bootstrap-username").send_keys("ops")
        driver.find_element(By.ID, "bootstrap-button").click()
        wait(driver, 30).until(lambda d: "ops" in d.find_element(By.ID, "who-name").text)
        # An admin: no Tenants in the menu.
        assert not driver.find_element(By.ID, "nav-tenants").is_displayed()
        granted = tenants.passkeyd("admin", "grant", "ops", "--role", "operator")
        assert granted.returncode == 0, granted.stderr
        # The role changed: the console session ended; signing in again shows the operator's menu.
        driver.get(home + "/admin/")
        visible(driver, "view-signin")
        driver.find_element(By.ID, "signin-button").click()
        wait(driver, 30).until(lambda d: d.find_element(By.ID, "nav-tenants").is_displayed())
        driver.find_element(By.CSS_SELECTOR, "#nav-tenants a").click()
        wait(driver).until(lambda d: "alpha" in d.find_element(By.ID, "view-page").text)
        form = driver.find_element(By.CSS_SELECTOR, "form.add-form")
        form.find_element(By.NAME, "name").send_keys("gamma")
        form.find_element(By.NAME, "rpID").send_keys("c.localhost")
        form.find_element(By.NAME, "origins").send_keys(origin(tenants, "c.localhost"))
        form.find_element(By.NAME, "hosts").send_keys("c.localhost")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait(driver, 30).until(lambda d: "Tenant gamma added" in d.find_element(By.ID, "message").text)
        listed = tenants.passkeyd("tenant", "list")
        assert "gamma\tc.localhost\tc.localhost" in listed.stdout, listed.stdout + listed.stderr
        for _ in range(200):
            if b"c.localhost" in get(tenants.port, "c.localhost", "/.well-known/webauthn")[1]:
                break
            time.sleep(0.1)
        assert b"c.localhost" in get(tenants.port, "c.localhost", "/.well-known/webauthn")[1]
    finally:
        driver.quit()
    removed = tenants.passkeyd("tenant", "remove", "gamma", "--confirm", "gamma")
    assert removed.returncode == 0, removed.stderr
