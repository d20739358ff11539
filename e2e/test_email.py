"""Email in the web UI (issue 43), in real Chromium against a real SMTP server: scripts/smtp_server.py
(aiosmtpd) on loopback, without STARTTLS (passkeyd speaks plain SMTP only to a loopback relay).

The whole story: an address at sign-up, its mail and link; every device lost; "Lost your passkey?",
the recovery mail, its link, a new passkey, the other passkeys removed; the "recovery used" notice,
"this wasn't me", and everything undone: the new passkey gone, every session ended, recovery by
mail closed (a new request sends nothing)."""
import base64
import email
import email.policy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from selenium.webdriver.common.by import By

from conftest import ROOT, Server, authenticator_options
from test_web import add_passkey_on_another_device, message, passkey_names, sign_out, visible, wait

# How long a mail that should not come is waited for: the outbox is polled every 250 ms.
QUIET_SECONDS = 5


class Mailbox:
    """scripts/smtp_server.py on 127.0.0.1 (a port the system picks), plain SMTP only; every
    message it accepts is one JSON line in its output file."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="passkeyd-smtp-")
        self.output = os.path.join(self.directory, "mail.jsonl")
        self.log = open(os.path.join(self.directory, "smtp.log"), "w")
        self.process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "smtp_server.py"), self.output, "--no-starttls"],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(self.output + ".port"):
            if time.time() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("smtp_server.py did not start")
            time.sleep(0.05)
        with open(self.output + ".port") as f:
            self.port = json.load(f)["smtp"]

    def messages(self):
        """Every accepted message so far: (recipients, parsed message)."""
        if not os.path.exists(self.output):
            return []
        with open(self.output) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return [(line["rcpt_tos"], email.message_from_bytes(base64.b64decode(line["data_b64"]), policy=email.policy.default))
                for line in lines]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def mailbox():
    box = Mailbox()
    yield box
    box.stop()


@pytest.fixture(scope="module")
def mail_server(mailbox):
    """passkeyd sending through the mailbox; sign-up requires an address."""
    s = Server(PASSKEYD_SMTP_URL=f"smtp://127.0.0.1:{mailbox.port}", PASSKEYD_EMAIL_FROM="Example <no-reply@example.com>",
               PASSKEYD_EMAIL_SIGNUP="required")
    yield s
    s.stop()


def read_mail(message, server):
    """A mail's plain text (quoted-printable decoded), its HTML, its link (action, token) and code."""
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    links = re.findall(re.escape(server.origin) + r"/#([a-z-]+)=([A-Za-z0-9_-]+)", text)
    assert len(set(links)) <= 1, links
    # The HTML part: the same link, no remote image, script or style sheet.
    for action, token in links:
        assert f"{server.origin}/#{action}={token}" in html
    assert "<img" not in html and "<script" not in html and "<link" not in html
    codes = re.findall(r"(?m)^\s*(\d{6})\s*$", text)
    return text, (links[0] if links else (None, None)), (codes[0] if codes else None)


def new_mail(mailbox, to, after):
    """The first mail for `to` at index `after` or later (waited for), from the configured sender:
    (its index, the message). Mails of an earlier test may still arrive in between."""
    deadline = time.time() + 30
    while time.time() < deadline:
        found = [(index, message) for index, (recipients, message) in enumerate(mailbox.messages()) if index >= after and recipients == [to]]
        if found:
            index, message = found[0]
            assert message["From"].addresses[0].addr_spec == "no-reply@example.com"
            assert message["From"].addresses[0].display_name == "Example"
            assert message["To"].addresses[0].addr_spec == to
            return index, message
        time.sleep(0.1)
    pytest.fail(f"no mail for {to}")


def mails_for(mailbox, to):
    return sum(1 for recipients, _ in mailbox.messages() if to in recipients)


def api(driver, method, path, body=None):
    """A same-origin API call from the page (its cookie): (status, JSON)."""
    return driver.execute_script("""
        const [method, path, body] = arguments;
        const init = { method, headers: {}, credentials: 'include' };
        if (body !== null) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
        const response = await fetch(path, init);
        return [response.status, await response.json().catch(() => null)];""", method, path, body)


def export(server, username):
    result = server.passkeyd("admin", "export", username)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def request_recovery_mail(driver, server, identifier):
    """'Lost your passkey?' on the sign-in page: the answer on screen."""
    driver.get(server.origin + "/#signin")
    visible(driver, "view-signin")
    visible(driver, "to-recover-email").click()
    visible(driver, "view-recover-email")
    field = driver.find_element(By.ID, "recover-email-identifier")
    field.clear()
    field.send_keys(identifier)
    driver.find_element(By.ID, "recover-email-button").click()
    visible(driver, "recover-email-code-form")
    return message(driver)


# The person dismisses the first passkey sheet: the browser's NotAllowedError, as a dismissal gives.
DISMISS_FIRST_CREATE = """
window.__dismissed = 0;
const create = navigator.credentials.create.bind(navigator.credentials);
navigator.credentials.create = (options) => {
  if (window.__dismissed === 0) {
    window.__dismissed += 1;
    return Promise.reject(new DOMException('The operation either timed out or was not allowed.', 'NotAllowedError'));
  }
  return create(options);
};
"""

SENT = "If an account has this verified address, we sent a mail to it. Open its link, or enter its code below."


def test_a_lost_passkey_comes_back_by_mail_and_this_wasnt_me_undoes_it(mail_server, mailbox, browser):
    server = mail_server
    address = "ada@example.com"
    start = len(mailbox.messages())

    # Sign-up asks for an address (PASSKEYD_EMAIL_SIGNUP=required).
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "signup-email-field")
    assert browser.find_element(By.ID, "signup-email").get_attribute("required") == "true"
    assert not browser.find_element(By.ID, "signup-email-optional").is_displayed()
    browser.find_element(By.ID, "signup-username").send_keys("ada")
    browser.find_element(By.ID, "signup-display-name").send_keys("Ada")
    browser.find_element(By.ID, "signup-button").click()
    assert "Give your email address" in message(browser)
    browser.find_element(By.ID, "signup-email").send_keys(address)
    browser.find_element(By.ID, "signup-button").click()
    visible(browser, "view-account")
    assert f"We sent a mail to {address}" in message(browser)
    visible(browser, "email-section")
    assert browser.find_element(By.ID, "email-address").text == address
    assert browser.find_element(By.ID, "email-verified").text == "not verified"
    visible(browser, "email-code-form")

    # The verification mail; its link, opened in this browser, asks first (nothing is posted yet),
    # and "Confirm my address" verifies the address.
    seen, verification = new_mail(mailbox, address, start)
    _, (action, token), code = read_mail(verification, server)
    assert action == "verify-email" and code is not None
    browser.get(f"{server.origin}/#verify-email={token}")
    visible(browser, "verify-email-confirm")
    assert "#verify-email=" not in browser.current_url
    assert not browser.find_element(By.ID, "verify-email-done").is_displayed()
    status, state = api(browser, "GET", "/api/auth/email")
    assert status == 200 and state["verified"] is False
    browser.find_element(By.ID, "verify-email-confirm-button").click()
    wait(browser).until(lambda d: f"Your address {address} is verified" in d.find_element(By.ID, "message").text)
    visible(browser, "view-account")
    assert "#verify-email=" not in browser.current_url
    wait(browser).until(lambda d: d.find_element(By.ID, "email-verified").text == "verified")
    assert "Recovery by email is open" in browser.find_element(By.ID, "email-recovery").text
    assert not browser.find_element(By.ID, "email-code-form").is_displayed()

    # A second passkey, on another device: the address gets a "passkey added" notice.
    add_passkey_on_another_device(browser)
    assert len(passkey_names(browser)) == 2
    seen, _ = new_mail(mailbox, address, seen + 1)

    # Every device lost: no authenticator with a passkey, signed out.
    sign_out(browser)
    assert request_recovery_mail(browser, server, address) == SENT
    seen, recovery = new_mail(mailbox, address, seen + 1)
    _, (action, token), code = read_mail(recovery, server)
    assert action == "email-recover" and code is not None

    # A new device, whose person presses "Create a new passkey" (the link alone does nothing), sees
    # the account's name, and first dismisses the passkey sheet (the link opens in this page: only
    # its fragment changes): "Try again" runs the same step, whose token is spent already.
    browser.add_virtual_authenticator(authenticator_options())
    browser.execute_script(DISMISS_FIRST_CREATE)
    browser.get(f"{server.origin}/#email-recover={token}")
    visible(browser, "view-recover-step")
    assert "#email-recover=" not in browser.current_url
    assert not browser.find_element(By.ID, "recover-step-account").is_displayed()
    assert browser.execute_script("return window.__dismissed") == 0
    browser.find_element(By.ID, "recover-step-button").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "recover-step-button").text == "Try again")
    assert browser.find_element(By.ID, "recover-step-account").text == "Creating a passkey for account ada. If this is not your account, cancel."
    assert browser.find_element(By.ID, "recover-step-username").text == "ada"
    assert "cancelled" in message(browser)
    assert browser.execute_script("return window.__dismissed") == 1
    assert browser.get_credentials() == []
    browser.find_element(By.ID, "recover-step-button").click()

    # Signed in with the new passkey; the other two may be the lost ones, or someone else's.
    visible(browser, "view-account")
    assert "signed in with your new passkey" in message(browser)
    wait(browser).until(lambda d: len(passkey_names(d)) == 3)
    visible(browser, "remove-others-banner")
    assert "2 other passkeys" in browser.find_element(By.ID, "remove-others-text").text
    new_passkey = browser.get_credentials()[0]
    browser.find_element(By.ID, "remove-others-button").click()
    wait(browser).until(lambda d: "Removed 2 other passkeys" in d.find_element(By.ID, "message").text)
    wait(browser).until(lambda d: len(passkey_names(d)) == 1)
    assert not browser.find_element(By.ID, "remove-others-banner").is_displayed()
    status, passkeys = api(browser, "GET", "/api/auth/passkeys")
    assert status == 200 and len(passkeys["passkeys"]) == 1
    assert passkeys["passkeys"][0]["id"] == new_passkey.id.rstrip("=")

    # The "recovery used" notice; "this wasn't me" undoes it, after a confirmation.
    seen, notice = new_mail(mailbox, address, seen + 1)
    text, (action, token), _ = read_mail(notice, server)
    assert action == "undo"
    browser.get(f"{server.origin}/#undo={token}")
    visible(browser, "view-undo")
    assert "#undo=" not in browser.current_url
    assert api(browser, "GET", "/api/auth/session")[0] == 200  # nothing happened yet
    browser.find_element(By.ID, "undo-button").click()
    visible(browser, "undo-done")
    done = browser.find_element(By.ID, "undo-list").text
    assert "The passkey that was added is removed." in done
    assert "Recovery by email is now closed." in done
    assert re.search(r"\d+ sessions? ended|Every session of the account has ended", done)

    # Everything undone: the new passkey is gone, this browser is signed out, no session is left.
    assert api(browser, "GET", "/api/auth/session")[0] == 401
    account = export(server, "ada")
    assert account["passkeys"] == []
    assert account["sessions"] == []
    browser.remove_virtual_authenticator()  # its passkey no longer counts
    browser.find_element(By.CSS_SELECTOR, "#undo-done a[href='#signin']").click()
    visible(browser, "view-signin")

    # Recovery by mail is closed: the same answer on screen, and no mail.
    before = mails_for(mailbox, address)
    assert request_recovery_mail(browser, server, address) == SENT
    time.sleep(QUIET_SECONDS)
    assert mails_for(mailbox, address) == before


def test_an_unknown_address_gets_the_same_answer_and_no_mail(mail_server, mailbox, browser):
    server = mail_server
    address = "bea@example.com"
    start = len(mailbox.messages())

    # An account whose address is verified with the code of its mail, on the account page.
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "signup-email-field")
    browser.find_element(By.ID, "signup-username").send_keys("bea")
    browser.find_element(By.ID, "signup-email").send_keys(address)
    browser.find_element(By.ID, "signup-button").click()
    visible(browser, "email-code-form")
    seen, verification = new_mail(mailbox, address, start)
    _, _, code = read_mail(verification, server)
    browser.find_element(By.ID, "email-code").send_keys("000000" if code != "000000" else "111111")
    browser.find_element(By.ID, "email-code-button").click()
    assert "That code is wrong" in message(browser)
    browser.find_element(By.ID, "email-code").clear()
    browser.find_element(By.ID, "email-code").send_keys(code)
    browser.find_element(By.ID, "email-code-button").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "email-verified").text == "verified")
    sign_out(browser)

    # The API's answer is the same for the account's address and an unknown one.
    known = api(browser, "POST", "/api/auth/recovery/email", {"identifier": address})
    unknown = api(browser, "POST", "/api/auth/recovery/email", {"identifier": "nobody@example.com"})
    assert known == unknown == [202, {"sent": True}]
    new_mail(mailbox, address, seen + 1)

    # And on screen: the same sentence for an unknown address and an unknown username.
    assert request_recovery_mail(browser, server, "nobody@example.com") == SENT
    assert request_recovery_mail(browser, server, "nobody") == SENT
    time.sleep(QUIET_SECONDS)
    assert mails_for(mailbox, address) == 2
    assert mails_for(mailbox, "nobody@example.com") == 0


def test_the_owner_of_an_address_removes_the_passkeys_made_before_it_was_verified(mail_server, mailbox, browser):
    """Someone signed up with another person's address; its owner opens the verification link (not
    signed in), sees the passkeys made before, and replaces them all with a passkey of their own."""
    server = mail_server
    address = "cy@example.com"
    start = len(mailbox.messages())
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "signup-email-field")
    browser.find_element(By.ID, "signup-username").send_keys("cy")
    browser.find_element(By.ID, "signup-email").send_keys(address)
    browser.find_element(By.ID, "signup-button").click()
    visible(browser, "view-account")
    sign_out(browser)  # the squatter leaves

    # The owner, on another device, opens the link.
    _, verification = new_mail(mailbox, address, start)
    _, (action, token), _ = read_mail(verification, server)
    assert action == "verify-email"
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(f"{server.origin}/#verify-email={token}")
    visible(browser, "view-verify-email")
    assert "#verify-email=" not in browser.current_url
    browser.find_element(By.ID, "verify-email-confirm-button").click()
    visible(browser, "verify-email-done")
    assert f"The address {address} of the account cy is confirmed." == browser.find_element(By.ID, "verify-email-result").text
    visible(browser, "verify-email-before")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#verify-email-passkeys li")) == 1
    browser.find_element(By.ID, "verify-email-claim").click()
    visible(browser, "view-account")
    assert "the 1 passkey made before you confirmed the address is removed" in message(browser)
    wait(browser).until(lambda d: len(passkey_names(d)) == 1)
    assert not browser.find_element(By.ID, "remove-others-banner").is_displayed()
    account = export(server, "cy")
    assert [passkey["id"] for passkey in account["passkeys"]] == [browser.get_credentials()[0].id.rstrip("=")]
    assert len(account["sessions"]) == 1


def test_a_mail_link_opened_without_a_click_spends_nothing(mail_server, mailbox, browser):
    """A mail scanner that runs the page opens each link and clicks nothing: the verification and
    the recovery links still work afterwards, and Cancel drops the token without spending it."""
    server = mail_server
    address = "fay@example.com"
    start = len(mailbox.messages())
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "signup-email-field")
    browser.find_element(By.ID, "signup-username").send_keys("fay")
    browser.find_element(By.ID, "signup-email").send_keys(address)
    browser.find_element(By.ID, "signup-button").click()
    visible(browser, "view-account")
    sign_out(browser)
    seen, verification = new_mail(mailbox, address, start)
    _, (action, token), _ = read_mail(verification, server)
    assert action == "verify-email"

    # The verification link, opened in a fresh page, then left with Cancel: nothing verified.
    browser.get("about:blank")
    browser.get(f"{server.origin}/#verify-email={token}")
    visible(browser, "verify-email-confirm")
    time.sleep(2)
    browser.find_element(By.ID, "verify-email-cancel").click()
    visible(browser, "view-signin")
    assert "#verify-email" not in browser.current_url

    # Opened again: the same token confirms the address.
    browser.get("about:blank")
    browser.get(f"{server.origin}/#verify-email={token}")
    visible(browser, "verify-email-confirm-button").click()
    visible(browser, "verify-email-done")
    assert browser.find_element(By.ID, "verify-email-result").text == f"The address {address} of the account fay is confirmed."

    # A recovery mail; its link opened in a fresh page and left alone for 2 s, then cancelled.
    assert api(browser, "POST", "/api/auth/recovery/email", {"identifier": address}) == [202, {"sent": True}]
    _, recovery = new_mail(mailbox, address, seen + 1)
    _, (action, token), _ = read_mail(recovery, server)
    assert action == "email-recover"
    browser.get("about:blank")
    browser.get(f"{server.origin}/#email-recover={token}")
    visible(browser, "view-recover-step")
    time.sleep(2)
    assert not browser.find_element(By.ID, "recover-step-account").is_displayed()
    browser.find_element(By.ID, "recover-step-cancel").click()
    visible(browser, "view-signin")

    # The same link in a fresh page on a new device (sign_out detached the first): the recovery completes.
    browser.add_virtual_authenticator(authenticator_options())
    browser.get("about:blank")
    browser.get(f"{server.origin}/#email-recover={token}")
    visible(browser, "recover-step-button").click()
    visible(browser, "view-account")
    assert "signed in with your new passkey" in message(browser)
    assert browser.find_element(By.ID, "recover-step-username").get_attribute("textContent") == "fay"
    assert len(export(server, "fay")["passkeys"]) == 2


def test_where_the_username_is_the_address_the_sign_up_form_asks_for_it_once(mailbox, browser):
    s = Server(PASSKEYD_SMTP_URL=f"smtp://127.0.0.1:{mailbox.port}", PASSKEYD_EMAIL_FROM="Example <no-reply@example.com>",
               PASSKEYD_EMAIL_SIGNUP="username")
    try:
        start = len(mailbox.messages())
        browser.add_virtual_authenticator(authenticator_options())
        browser.get(s.origin + "/#signup")
        visible(browser, "view-signup")
        wait(browser).until(lambda d: d.find_element(By.ID, "signup-username").get_attribute("type") == "email")
        assert browser.find_element(By.ID, "signup-username-label").text == "Email address"
        assert not browser.find_element(By.ID, "signup-email-field").is_displayed()
        browser.find_element(By.ID, "signup-username").send_keys("dee@example.com")
        browser.find_element(By.ID, "signup-button").click()
        visible(browser, "view-account")
        assert "We sent a mail to dee@example.com" in message(browser)
        wait(browser).until(lambda d: d.find_element(By.ID, "email-address").text == "dee@example.com")
        _, verification = new_mail(mailbox, "dee@example.com", start)
        _, (action, _), _ = read_mail(verification, s)
        assert action == "verify-email"
    finally:
        s.stop()
