"""What a person does in the web UI, in real Chromium with a virtual passkey authenticator."""
import os
import pathlib

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import authenticator_options

SCREENSHOTS = pathlib.Path(os.environ.get("PASSKEYD_SCREENSHOTS", pathlib.Path(__file__).resolve().parent.parent / "docs" / "screenshots"))


def wait(driver, seconds=15):
    """Polls until a condition holds. An element that a page re-rendered between finding it and
    reading it (stale) is looked for again, as a missing one is: a CI run failed on a table the
    console drew anew as the wait read its text."""
    return WebDriverWait(driver, seconds, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))


def visible(driver, element_id):
    return wait(driver).until(EC.visibility_of_element_located((By.ID, element_id)))


def message(driver):
    box = wait(driver).until(EC.visibility_of_element_located((By.ID, "message")))
    wait(driver).until(lambda d: box.text.strip() != "")
    return box.text


def passkey_names(driver):
    # Read in one script call: the list is re-rendered after each change.
    return driver.execute_script("return [...document.querySelectorAll('#passkey-list .passkey-name')].map(e => e.textContent)")


def sign_up(driver, server, username, display_name=""):
    driver.get(server.origin + "/#signup")
    visible(driver, "view-signup")
    driver.find_element(By.ID, "signup-username").send_keys(username)
    if display_name:
        driver.find_element(By.ID, "signup-display-name").send_keys(display_name)
    driver.find_element(By.ID, "signup-button").click()
    visible(driver, "view-account")


def sign_out(driver):
    """Signs out with no authenticator attached and returns the passkeys it held.

    In automation, Chromium completes a conditional (AutoFill) request at once when a virtual
    authenticator holds a matching passkey, so with one attached the sign-in page would sign
    straight back in. Detaching it first lets a test look at the signed-out page."""
    credentials = driver.get_credentials()
    driver.remove_virtual_authenticator()
    driver.find_element(By.ID, "signout-button").click()
    visible(driver, "view-signin")
    assert "signed out" in message(driver)
    return credentials


def attach(driver, credentials=(), **options):
    driver.add_virtual_authenticator(authenticator_options(**options))
    for credential in credentials:
        driver.add_credential(credential)


def add_passkey_on_another_device(driver):
    """Detaches the current authenticator (returning its passkeys), attaches a new one and adds
    a passkey from it through the account page."""
    count = len(passkey_names(driver))
    previous = driver.get_credentials()
    driver.remove_virtual_authenticator()
    driver.add_virtual_authenticator(authenticator_options())
    driver.find_element(By.ID, "add-passkey-button").click()
    wait(driver).until(lambda d: len(passkey_names(d)) == count + 1)
    return previous


def screenshot(driver, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / name))


def test_sign_up_sign_out_and_sign_in_with_the_button(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "view-signup")
    screenshot(browser, "signup.png")
    sign_up(browser, server, "ada", "Ada Lovelace")
    assert "Welcome, Ada Lovelace" in message(browser)
    assert "Ada Lovelace (ada)" in browser.find_element(By.ID, "account-greeting").text
    assert len(passkey_names(browser)) == 1
    # The only passkey cannot be deleted.
    assert browser.find_element(By.CSS_SELECTOR, "#passkey-list .delete-button").get_attribute("disabled") is not None

    passkeys = sign_out(browser)
    screenshot(browser, "signin.png")
    # Username-first, through the button (the modal sheet).
    attach(browser, passkeys)
    browser.find_element(By.ID, "signin-username").send_keys("ada")
    browser.find_element(By.ID, "signin-button").click()
    visible(browser, "view-account")
    assert "Signed in as ada" in message(browser)
    # A reload keeps the session (cookie).
    browser.refresh()
    visible(browser, "view-account")
    # Back to the sign-up page while signed in (the Back button): the account shows instead, so
    # a sign-up cannot turn into a passkey on this account.
    browser.get(server.origin + "/#signup")
    browser.refresh()
    visible(browser, "view-account")
    assert browser.current_url.endswith("#account")


def test_sign_in_with_autofill(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "grace")
    passkeys = sign_out(browser)
    attach(browser, passkeys)
    # The sign-in page starts a conditional (AutoFill) request on load; the passkey offered in
    # the username field's suggestions signs in without pressing the button (Chromium's
    # automation picks the suggestion).
    browser.get(server.origin + "/")
    field = browser.find_element(By.ID, "signin-username")
    assert field.get_attribute("autocomplete") == "username webauthn"
    visible(browser, "view-account")
    assert "Signed in as grace" in message(browser)


def test_add_rename_and_delete_passkeys(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "bob")
    add_passkey_on_another_device(browser)
    assert "Added" in message(browser)
    screenshot(browser, "account.png")

    # Rename the second passkey.
    items = browser.find_elements(By.CSS_SELECTOR, "#passkey-list .passkey")
    items[1].find_element(By.CSS_SELECTOR, ".rename-button").click()
    field = items[1].find_element(By.CSS_SELECTOR, ".rename-input")
    field.clear()
    field.send_keys("Work laptop")
    items[1].find_element(By.CSS_SELECTOR, ".rename-form button[type=submit]").click()
    wait(browser).until(lambda d: "Work laptop" in passkey_names(d))

    # Delete it, through the confirmation dialog.
    items = browser.find_elements(By.CSS_SELECTOR, "#passkey-list .passkey")
    target = [i for i in items if i.find_element(By.CSS_SELECTOR, ".passkey-name").text == "Work laptop"][0]
    target.find_element(By.CSS_SELECTOR, ".delete-button").click()
    visible(browser, "confirm-delete")
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(lambda d: passkey_names(d) == [n for n in passkey_names(d) if n != "Work laptop"] and len(passkey_names(d)) == 1)
    assert "Deleted" in message(browser)


def test_no_passkey_gives_a_clear_message(impatient_server, browser):
    server = impatient_server
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "carol")
    sign_out(browser)
    # The authenticator is gone: no passkey on this device. The browser waits for one until the
    # ceremony's timeout (10 s here), then the page says what happened.
    browser.find_element(By.ID, "signin-button").click()
    wait(browser, 30).until(lambda d: "no passkey" in d.find_element(By.ID, "message").text)
    assert browser.find_element(By.ID, "view-signin").is_displayed()
    # A person who cancels gets a clear message at once. (Chromium's virtual authenticator ends
    # the request at once when verification fails; one that does not consent never answers,
    # which is the timeout above.)
    browser.add_virtual_authenticator(authenticator_options(user_verified=False))
    browser.find_element(By.ID, "signin-button").click()
    wait(browser, 15).until(lambda d: "cancelled" in d.find_element(By.ID, "message").text)


def test_a_passkey_deleted_on_the_server_is_reported(server, browser):
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "dave")
    # Move to a second device, add a passkey there, delete the first device's passkey.
    old = add_passkey_on_another_device(browser)
    first = browser.find_elements(By.CSS_SELECTOR, "#passkey-list .passkey")[0]
    first.find_element(By.CSS_SELECTOR, ".delete-button").click()
    visible(browser, "confirm-delete")
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser).until(lambda d: len(passkey_names(d)) == 1)
    sign_out(browser)
    # Back on the first device, which still offers its deleted passkey: through AutoFill (the
    # pending conditional request may pick it up as soon as it appears) or the button.
    attach(browser, old)
    says_gone = lambda d: "no longer exists" in d.find_element(By.ID, "message").text
    try:
        wait(browser, 5).until(says_gone)
    except TimeoutException:
        browser.find_element(By.ID, "signin-button").click()
        wait(browser, 15).until(says_gone)
    assert browser.find_element(By.ID, "view-signin").is_displayed()
