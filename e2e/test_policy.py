"""The authenticator policy as a person meets it in the web UI: a passkey from a model the site
does not accept is refused, and the message says which authenticators are accepted."""
import pytest
from selenium.webdriver.common.by import By

from conftest import Server, authenticator_options
from test_web import message, visible

# A security key model (YubiKey 5 series); Chromium's virtual authenticator is not one.
YUBIKEY = "ee882879-721c-4913-9775-3dfcce97072a"


@pytest.fixture(scope="module")
def strict_server():
    s = Server(PASSKEYD_ALLOWED_AAGUIDS=YUBIKEY, PASSKEYD_REQUIRE_DEVICE_BOUND="true")
    yield s
    s.stop()


def test_a_refused_authenticator_is_told_which_ones_are_accepted(strict_server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(strict_server.origin + "/#signup")
    visible(browser, "view-signup")
    browser.find_element(By.ID, "signup-username").send_keys("policy-person")
    browser.find_element(By.ID, "signup-button").click()
    text = message(browser)
    assert "This site accepts passkeys from:" in text, text
    assert "synced passkeys are not" in text, text
    # Nothing was kept: the name is still free and nobody is signed in.
    status = browser.execute_script(
        "return fetch('/api/auth/session').then(r => r.status)")
    assert status == 401
    assert browser.find_element(By.ID, "view-signup").is_displayed()
