"""The web UI's languages: the catalogues (Public/i18n/<language>.json) are complete and agree with
each other, with the page and with the API's error codes; and a person whose browser reads French
gets the UI in French."""
import html.parser
import json
import re

import pytest
from selenium.webdriver.common.by import By

from conftest import ROOT, authenticator_options
from test_web import message, screenshot, visible, wait

PUBLIC = ROOT / "Public"
LANGUAGES = ("en", "fr")
CATALOGUES = {language: json.loads((PUBLIC / "i18n" / f"{language}.json").read_text(encoding="utf-8")) for language in LANGUAGES}
PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Codes the client makes itself (docs/web.md); the Swift client's catalogue uses the same keys.
CLIENT_CODES = {"cancelled", "timeout", "no_passkey_on_device", "passkey_removed", "network", "unsupported", "invalid_response", "unknown", "authenticator_failed",
                "decryption_failed", "invalid_argument", "not_text"}


@pytest.mark.parametrize("language", [language for language in LANGUAGES if language != "en"])
def test_every_language_has_exactly_the_english_keys_and_placeholders(language):
    english, other = CATALOGUES["en"], CATALOGUES[language]
    assert sorted(set(english) - set(other)) == [], f"missing in {language}.json"
    assert sorted(set(other) - set(english)) == [], f"in {language}.json but not in en.json"
    for key, text in english.items():
        assert set(PLACEHOLDER.findall(other[key])) == set(PLACEHOLDER.findall(text)), f"{language}.json {key}: placeholders differ"
        assert other[key].strip(), f"{language}.json {key} is empty"


def test_every_error_code_of_the_api_has_a_sentence():
    openapi = json.loads((ROOT / "Sources" / "PasskeyServer" / "Resources" / "openapi.json").read_text(encoding="utf-8"))
    codes = set(openapi["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])
    keys = {key.removeprefix("error.") for key in CATALOGUES["en"] if key.startswith("error.")}
    assert sorted(codes - keys) == [], "API error codes without error.<code> in en.json"
    # Nothing else under error. but the client's own codes.
    assert sorted(keys - codes - CLIENT_CODES) == []


class _Texts(html.parser.HTMLParser):
    """The page's keys (data-i18n, data-i18n-aria-label, data-i18n-title) and any text outside them."""

    def __init__(self):
        super().__init__()
        self.keys, self.stray, self.stack = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("data-i18n", "data-i18n-aria-label", "data-i18n-title"):
            if name in attrs:
                self.keys.add(attrs[name])
        if tag not in ("meta", "link", "input", "br"):
            self.stack.append((tag, "data-i18n" in attrs, attrs.get("id")))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data):
        text = data.strip()
        if not text or any(translated for _, translated, _ in self.stack):
            return
        inside = [tag for tag, _, _ in self.stack]
        ids = {element_id for _, _, element_id in self.stack}
        # The brand, the document title and the consent heading (filled from consent.title by app.js).
        if "title" in inside or "script" in inside or "style" in inside or ids & {"consent-title"} or text in ("passkeyd", "·"):
            return
        self.stray.append(text)


def test_the_page_and_the_scripts_use_only_keys_the_catalogue_has():
    page = _Texts()
    page.feed((PUBLIC / "index.html").read_text(encoding="utf-8"))
    english = CATALOGUES["en"]
    assert sorted(page.keys - set(english)) == [], "index.html keys missing from en.json"
    assert page.stray == [], "text in index.html that no data-i18n key covers"
    # Every key-like string literal of app.js ('status.signed_in', 'sessions.method.' + …).
    script = (PUBLIC / "app.js").read_text(encoding="utf-8")
    literals = set(re.findall(r"'([a-z_]+(?:\.[a-z_]+)+\.?)'", script))
    for literal in literals:
        if literal.endswith("."):
            assert any(key.startswith(literal) for key in english), literal
        else:
            assert literal in english or literal + ".other" in english, f"app.js uses {literal!r}, which en.json lacks"
    plurals = {key.rsplit(".", 1)[0] for key in english if key.endswith(".one")}
    assert all(f"{base}.other" in english for base in plurals)


def test_the_ui_speaks_french_to_a_french_browser(server, french_browser):
    browser = french_browser
    browser.add_virtual_authenticator(authenticator_options())
    browser.get(server.origin + "/#signup")
    visible(browser, "view-signup")
    wait(browser).until(lambda d: d.execute_script("return document.documentElement.lang") == "fr")
    assert browser.find_element(By.ID, "signup-title").text == "Créer un compte"
    assert browser.find_element(By.ID, "signup-button").text == "Créer une clé d'accès"
    assert browser.find_element(By.CSS_SELECTOR, "label[for=signup-username]").text == "Nom d'utilisateur"
    screenshot(browser, "signup-fr.png")

    browser.find_element(By.ID, "signup-username").send_keys("amelie")
    browser.find_element(By.ID, "signup-display-name").send_keys("Amélie")
    browser.find_element(By.ID, "signup-button").click()
    visible(browser, "view-account")
    assert "Bienvenue, Amélie." in message(browser)
    assert browser.find_element(By.ID, "account-title").text == "Vos clés d'accès"
    assert "Connecté en tant que Amélie (amelie)." == browser.find_element(By.ID, "account-greeting").text
    assert "Ce navigateur" in browser.find_element(By.ID, "session-list").text
    assert browser.find_element(By.CSS_SELECTOR, "#passkey-list .delete-button").get_attribute("aria-label").startswith("Supprimer ")

    # A refusal from the server, in French too: the name is taken.
    browser.execute_script("return fetch('/api/auth/session', {method: 'DELETE'})")
    browser.remove_virtual_authenticator()
    browser.get(server.origin + "/#signup")
    visible(browser, "view-signup")
    field = browser.find_element(By.ID, "signup-username")
    field.clear()
    field.send_keys("amelie")
    browser.find_element(By.ID, "signup-button").click()
    assert message(browser) == CATALOGUES["fr"]["error.username_taken"]


@pytest.mark.parametrize("query, language, title", [("?lang=fr", "fr", "Connexion"), ("?lang=de", "en", "Sign in"), ("", "en", "Sign in")])
def test_the_lang_parameter_chooses_the_language(server, browser, query, language, title):
    browser.get(server.origin + "/" + query + "#signin")
    visible(browser, "view-signin")
    wait(browser).until(lambda d: d.find_element(By.ID, "signin-title").text == title)
    assert browser.execute_script("return document.documentElement.lang") == language


# The operator's console (Public/admin/): its own catalogues, over the account UI's error.* sentences.
CONSOLE = PUBLIC / "admin"
CONSOLE_CATALOGUES = {language: json.loads((CONSOLE / "i18n" / f"{language}.json").read_text(encoding="utf-8")) for language in LANGUAGES}
# The contract's console codes (issue 36) and the reused ones an operator reads differently.
CONSOLE_CODES = {"admin_required", "admin_role_required", "bootstrap_invalid", "confirmation_mismatch", "reason_required", "invalid_query",
                 "reauthentication_required", "csrf_origin_mismatch", "last_passkey", "account_not_found", "passkey_not_found", "rate_limited",
                 "invalid_webhook_url", "not_found"}


@pytest.mark.parametrize("language", [language for language in LANGUAGES if language != "en"])
def test_the_console_catalogues_have_the_same_keys_and_placeholders(language):
    english, other = CONSOLE_CATALOGUES["en"], CONSOLE_CATALOGUES[language]
    assert sorted(set(english) - set(other)) == [], f"missing in admin/i18n/{language}.json"
    assert sorted(set(other) - set(english)) == [], f"in admin/i18n/{language}.json but not in admin/i18n/en.json"
    for key, text in english.items():
        assert set(PLACEHOLDER.findall(other[key])) == set(PLACEHOLDER.findall(text)), f"admin/i18n/{language}.json {key}: placeholders differ"
        assert other[key].strip(), f"admin/i18n/{language}.json {key} is empty"


def test_the_console_words_every_console_error_code():
    keys = {key.removeprefix("error.") for key in CONSOLE_CATALOGUES["en"] if key.startswith("error.")}
    assert sorted(CONSOLE_CODES - keys) == []
    # Any other error.<code> of the console is one the API or the client knows.
    openapi = json.loads((ROOT / "Sources" / "PasskeyServer" / "Resources" / "openapi.json").read_text(encoding="utf-8"))
    codes = set(openapi["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])
    assert sorted(keys - codes - CLIENT_CODES - CONSOLE_CODES - {"credential_already_registered"}) == []


def test_the_console_page_and_scripts_use_only_keys_its_catalogue_has():
    english = CONSOLE_CATALOGUES["en"]
    page = _Texts()
    page.feed((CONSOLE / "index.html").read_text(encoding="utf-8"))
    assert sorted(page.keys - set(english)) == [], "admin/index.html keys missing from admin/i18n/en.json"
    assert page.stray == [], "text in admin/index.html that no data-i18n key covers"
    for script in sorted(CONSOLE.rglob("*.js")):
        for literal in set(re.findall(r"'([a-z_]+(?:\.[a-z_]+)+\.?)'", script.read_text(encoding="utf-8"))):
            if literal.endswith("."):
                assert any(key.startswith(literal) for key in english), f"{script.name}: {literal!r}"
            else:
                assert literal in english or literal + ".other" in english, f"{script.name} uses {literal!r}, which admin/i18n/en.json lacks"


def test_the_console_lists_and_words_every_audit_kind():
    """Every kind of audit line passkeyd writes (AuditEvent.Kind) is offered by the console's audit
    filter and webhook form (pages/audit.js KINDS) and has a label in its catalogue."""
    models = (ROOT / "Sources" / "PasskeyModels" / "Models.swift").read_text(encoding="utf-8")
    enum = models[models.index("public enum Kind: String"):]
    kinds = re.findall(r'case \w+ = "(\w+)"', enum[:enum.index("\n    }\n")])
    assert "admin_bootstrap_issued" in kinds and "sign_up" in kinds
    script = (CONSOLE / "pages" / "audit.js").read_text(encoding="utf-8")
    listed = re.findall(r"'(\w+)'", script[script.index("export const KINDS = ["):script.index("];")])
    assert sorted(set(kinds) - set(listed)) == [], "kinds missing from KINDS in admin/pages/audit.js"
    assert sorted(set(listed) - set(kinds)) == [], "KINDS names a kind passkeyd does not write"
    english = CONSOLE_CATALOGUES["en"]
    assert sorted(kind for kind in kinds if "kind." + kind not in english) == [], "kinds without kind.<kind> in admin/i18n/en.json"
