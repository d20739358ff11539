"""From passwords to passkeys, and back in when passkeys are lost: in real Chromium."""
import bcrypt
from selenium.webdriver.common.by import By

from conftest import authenticator_options
from test_web import message, passkey_names, screenshot, sign_out, sign_up, visible, wait


def import_user(server, username, password):
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
    path = f"{server.directory}/{username}.csv"
    with open(path, "w") as f:
        f.write(f"username,displayName,passwordHash\n{username},{username.title()},{hashed}\n")
    result = server.passkeyd("import", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "imported 1" in result.stdout


# Headless Chromium reports `conditionalCreate` but, without Google Password Manager having just
# filled the password, leaves a conditional create pending forever (the specification lets the
# browser decide). This stands in for the browser's grant: the page's conditional request is
# forwarded as an ordinary create to the virtual authenticator, and recorded, so the test shows
# the page asks with mediation "conditional" and completes the upgrade with a real passkey.
GRANT_CONDITIONAL_CREATE = """
window.__conditionalCreates = 0;
const create = navigator.credentials.create.bind(navigator.credentials);
navigator.credentials.create = (options) => {
  if (options && options.mediation === 'conditional') {
    window.__conditionalCreates += 1;
    const { mediation, ...modal } = options;
    return create(modal);
  }
  return create(options);
};
"""


def test_password_sign_in_then_conditional_create_makes_a_passkey(migration_server, browser):
    import_user(migration_server, "grace", "cobol-1959")
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": GRANT_CONDITIONAL_CREATE})
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(migration_server.origin + "/#password")
    visible(browser, "view-password")
    browser.find_element(By.ID, "password-username").send_keys("grace")
    browser.find_element(By.ID, "password-input").send_keys("wrong password")
    browser.find_element(By.ID, "password-button").click()
    assert "Wrong username or password" in message(browser)
    field = browser.find_element(By.ID, "password-input")
    field.clear()
    field.send_keys("cobol-1959")
    browser.find_element(By.ID, "password-button").click()
    visible(browser, "view-account")
    # Conditional create: the browser's password manager makes the passkey with no further step.
    assert browser.execute_script("return (await PublicKeyCredential.getClientCapabilities()).conditionalCreate") is True
    wait(browser, 20).until(lambda d: len(passkey_names(d)) == 1)
    assert browser.execute_script("return window.__conditionalCreates") == 1
    wait(browser).until(lambda d: "created a passkey" in d.find_element(By.ID, "message").text)
    assert len(browser.get_credentials()) == 1
    screenshot(browser, "upgraded.png")
    # The password can now be turned off.
    visible(browser, "password-section")
    browser.find_element(By.ID, "password-remove-button").click()
    wait(browser).until(lambda d: "password is off" in d.find_element(By.ID, "message").text)
    assert not browser.find_element(By.ID, "password-section").is_displayed()


def test_a_recovery_code_leads_to_a_new_passkey(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "lin", "Lin")
    visible(browser, "recovery-codes")
    codes = browser.execute_script("return [...document.querySelectorAll('#recovery-codes-list li')].map(e => e.textContent)")
    assert len(codes) == 10 and all(len(code) == 14 for code in codes)
    screenshot(browser, "recovery-codes.png")
    sign_out(browser)  # the device with the passkey is lost

    browser.get(server.origin + "/#recover")
    visible(browser, "view-recover")
    browser.find_element(By.ID, "recover-username").send_keys("lin")
    browser.find_element(By.ID, "recover-code").send_keys(codes[0].upper())
    browser.find_element(By.ID, "recover-button").click()
    visible(browser, "view-account")
    visible(browser, "recovery-banner")
    assert "recovery code" in message(browser)

    browser.add_virtual_authenticator(authenticator_options())  # a new device
    browser.find_element(By.ID, "recovery-passkey-button").click()
    wait(browser).until(lambda d: len(passkey_names(d)) == 2)
    assert not browser.find_element(By.ID, "recovery-banner").is_displayed()
    # Remove the lost passkey (the first one).
    browser.find_elements(By.CSS_SELECTOR, "#passkey-list .delete-button")[0].click()
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(lambda d: len(passkey_names(d)) == 1)

    # The code was single use.
    sign_out(browser)
    browser.get(server.origin + "/#recover")
    visible(browser, "view-recover")
    browser.find_element(By.ID, "recover-username").send_keys("lin")
    browser.find_element(By.ID, "recover-code").send_keys(codes[0])
    browser.find_element(By.ID, "recover-button").click()
    assert "wrong or was already used" in message(browser)


def test_an_admin_recovery_link_signs_in_once(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "mae", "Mae")
    sign_out(browser)
    result = server.passkeyd("admin", "recovery-link", "mae", "--base-url", server.origin)
    assert result.returncode == 0, result.stderr
    link = result.stdout.strip()
    assert link.startswith(server.origin + "/#recover=")
    browser.get(link)
    visible(browser, "recovery-banner")
    assert "recovery link" in message(browser)
    assert "#recover=" not in browser.current_url
    browser.find_element(By.ID, "signout-button").click()  # no authenticator attached any more
    visible(browser, "view-signin")
    browser.get(link)
    assert "already used" in message(browser)
