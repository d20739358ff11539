"""The web client of a widely copied public guide ("Apple Passkeys Complete Implementation Guide",
its `class PasskeyWebManager`) works against passkeyd unmodified, in real Chromium with a virtual
authenticator: register, check, sign in username-first and through AutoFill, add a second
passkey while signed in, sign in with two, delete; for USERS people each, with random credential
IDs, enough that IDs holding base64url's `-`/`_` (which `window.atob` refuses) certainly occur.

The class is read from the guide at test time, never re-typed. The guide's text lost its line
breaks, so a `// comment` runs into the code of the next original line; `restore_line_breaks`
puts them back with the rule documented there, and the first test checks Chromium parses the
result (if the rule ever breaks, that test fails and says so).
"""
import base64
import json
import math
import re
import secrets
import shutil
import tempfile
import pathlib

import pytest
import requests

from conftest import ROOT, Server, authenticator_options

GUIDE = ROOT.parent / "shared" / "seeds" / "000_0322896ac4688a3d.txt"
CLASS_START = "class PasskeyWebManager {"
USERS = 12
METHODS = ("register", "authenticate", "hasPasskeys", "deletePasskey")


# ---------------------------------------------------------------------------------------------
# Reading the class out of the guide

class RestoreError(AssertionError):
    """The line-break rule did not give back the guide's code."""


# The rule. Outside string literals ('…', "…", `…`) and /* … */ comments, a `//` comment ends at
# the end of its text line or just before the first of these code tokens that follows a space,
# whichever comes first (the comment's own words never look like them in this guide; prose
# colons only follow step numbers, "Step 1: Get …"):
#   - a statement keyword: `const `, `let `, `return `, `await `, `if (`
#   - a dotted name: `this.x`, `options.x`, `publicKeyCredentialCreationOptions.x`
#   - an assignment: `credential = `
#   - an object key: `identifier: ` (`userVerification: 'required'`, `largeBlob: {`,
#     `excludeCredentials: options…`)
#   - a bracket: `{`, `}`, `]`
# A line break is put back after the comment. Everything else is copied as it is.
CODE_START = re.compile(r"""(?<=\s)(?:
      (?:const|let|return|await)\s
    | if\s\(
    | [A-Za-z_$][\w$]*\.[A-Za-z_$]
    | [A-Za-z_$][\w$]*\s=\s
    | [A-Za-z_$][\w$]*:\s
    | [{}\]]
)""", re.X)
# What a restored comment may not hold: any of these is code the rule left inside a comment.
CODE_IN_COMMENT = re.compile(r"""[;={}\[\]'"`]""")


def read_guide_class():
    """The guide's lines from `class PasskeyWebManager {` on (read line by line, no regex over
    the whole file). Skips the test when the seeds folder is absent."""
    if not GUIDE.parent.is_dir():
        pytest.skip(f"the seeds folder {GUIDE.parent} is absent (needs {GUIDE})")
    if not GUIDE.is_file():
        pytest.skip(f"the guide {GUIDE} is absent")
    lines = []
    with open(GUIDE, encoding="utf-8") as guide:
        for line in guide:
            if lines or line.startswith(CLASS_START):
                lines.append(line.rstrip("\n"))
    if not lines:
        raise RestoreError(f"no line of {GUIDE} starts with {CLASS_START!r}")
    return "\n".join(lines)


def restore_line_breaks(text):
    """The class (from its `class` keyword to the brace that closes it) with the line breaks
    after `//` comments put back by the rule above; and the comments found."""
    out, comments = [], []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n" and c != "`":
                    raise RestoreError(f"a {c}-string runs past its line: {text[i:i + 80]!r}")
                j += 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise RestoreError(f"a /* comment is never closed: {text[i:i + 80]!r}")
            out.append(text[i:j + 2])
            i = j + 2
        elif text.startswith("//", i):
            end_of_line = text.find("\n", i)
            end_of_line = n if end_of_line < 0 else end_of_line
            code = CODE_START.search(text, i + 2, end_of_line)
            end = code.start() if code else end_of_line
            comment = text[i:end].rstrip()
            if CODE_IN_COMMENT.search(comment):
                raise RestoreError(f"the line-break rule left code inside a comment: {comment!r}")
            comments.append(comment)
            out.append(comment + "\n")
            i = end
        else:
            depth += c == "{"
            depth -= c == "}"
            out.append(c)
            i += 1
            if c == "}" and depth == 0:
                return "".join(out), comments
    raise RestoreError("the class's braces never balance: the line-break rule hid a brace in a comment")


def guide_class():
    code, comments = restore_line_breaks(read_guide_class())
    return code, comments


def parse_in_page(driver, code):
    """Parses `code` in the page (`new Function`); the class's method names, or the error."""
    return driver.execute_script("""
        try {
            const cls = new Function(arguments[0] + "\\n;return PasskeyWebManager;")();
            return {ok: true, methods: Object.getOwnPropertyNames(cls.prototype)};
        } catch (error) {
            return {ok: false, error: error.name + ": " + error.message};
        }""", code)


def test_the_restored_guide_class_parses_in_chromium(browser):
    code, comments = guide_class()
    # Every comment of the class, each on its own line again (the guide has 32 of them).
    assert len(comments) >= 25, comments
    assert all(c.startswith("//") and "\n" not in c for c in comments)
    browser.get("data:text/html,<!doctype html><title>parse</title>")
    parsed = parse_in_page(browser, code)
    assert parsed["ok"], (f"the line-break rule broke: Chromium cannot parse the restored PasskeyWebManager "
                          f"({parsed.get('error')}); the restored code:\n{code}")
    for method in METHODS:
        assert method in parsed["methods"], f"the restored class has no {method}(): {parsed['methods']}"


# ---------------------------------------------------------------------------------------------
# Serving the guide's client next to the API

SEED_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>seed client</title>
<script src="/seed-recorder.js"></script>
<script src="/seed-client.js"></script>
</head><body>
<form id="form" onsubmit="return false">
  <label for="username">Username</label>
  <input id="username" name="username" type="text" autocomplete="username webauthn">
</form>
</body></html>
"""

# Records, without changing them, the JSON answers of /api/auth and the mediation of each
# navigator.credentials.get, for the test to look at.
SEED_RECORDER = """window.seedAnswers = [];
window.seedMediations = [];
const seedFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const response = await seedFetch(input, init);
  const url = typeof input === "string" ? input : input.url;
  if (url.includes("/api/auth/")) {
    const text = await response.clone().text();
    window.seedAnswers.push({url, method: (init && init.method) || "GET", status: response.status, text});
  }
  return response;
};
const seedGet = navigator.credentials.get.bind(navigator.credentials);
navigator.credentials.get = (options) => {
  window.seedMediations.push((options && options.mediation) || "optional");
  return seedGet(options);
};
"""


@pytest.fixture(scope="module")
def seed_server():
    code, _ = guide_class()
    public = pathlib.Path(tempfile.mkdtemp(prefix="passkeyd-seed-public-"))
    shutil.copytree(ROOT / "Public", public, dirs_exist_ok=True)
    (public / "seed-client.js").write_text(code + "\nwindow.PasskeyWebManager = PasskeyWebManager;\n", encoding="utf-8")
    (public / "seed-recorder.js").write_text(SEED_RECORDER, encoding="utf-8")
    (public / "seed.html").write_text(SEED_HTML, encoding="utf-8")
    # Twelve people (and their sign-ins) from one address fit in a window.
    server = Server(PASSKEYD_PUBLIC_DIRECTORY=str(public), PASSKEYD_RATE_LIMIT_PER_IP="10000",
                    PASSKEYD_RATE_LIMIT_PER_ACCOUNT="1000", PASSKEYD_RATE_LIMIT_PER_ACCOUNT_TOTAL="10000")
    yield server
    server.stop()
    shutil.rmtree(public, ignore_errors=True)


def run(driver, body, *args):
    """Runs `body`, the body of an async function of `args` (the page's JavaScript), and gives
    back {ok, value} or {ok: false, error}."""
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const args = Array.prototype.slice.call(arguments, 0, -1);
        (async (...args) => { %s })(...args).then(
            value => done({ok: true, value: value === undefined ? null : value}),
            error => done({ok: false, error: String(error && error.name) + ": " + String(error && error.message)}));
    """ % body, *args)


def manager(call):
    return ("const manager = new PasskeyWebManager({rpName: 'seed test', rpId: location.hostname, apiEndpoint: '/api/auth'});"
            f"return await manager.{call};")


FETCH = """const response = await fetch(args[0], args[1] || {});
const text = await response.text();
return {status: response.status, text};"""


def fetch(driver, url, init=None):
    answer = run(driver, FETCH, url, init or {})
    assert answer["ok"], answer
    value = answer["value"]
    try:
        value["json"] = json.loads(value["text"]) if value["text"] else None
    except ValueError:
        value["json"] = None
    return value


def signed_in_as(driver):
    session = fetch(driver, "/api/auth/session")
    return session["json"]["user"]["username"] if session["status"] == 200 else None


def sign_out(driver):
    fetch(driver, "/api/auth/session", {"method": "DELETE"})
    assert signed_in_as(driver) is None, "still signed in after DELETE /api/auth/session"


def atob_decodes(text):
    """What `window.atob` accepts (forgiving-base64): the standard alphabet, padding optional."""
    if not isinstance(text, str) or "-" in text or "_" in text or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        return False
    stripped = text.rstrip("=")
    if len(stripped) % 4 == 1:
        return False
    base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)
    return True


def open_seed_page(driver, server):
    driver.set_script_timeout(40)
    driver.get(server.origin + "/seed.html")
    loaded = driver.execute_script("return typeof window.PasskeyWebManager")
    assert loaded == "function", "seed-client.js (the restored guide class) did not load in the served page"
    assert driver.execute_script("return new PasskeyWebManager({}).isSupported") is True


def register_fresh(driver, server, username, first):
    """Flow 1: a fresh authenticator and no session; the guide's register() → {success: true}
    and the session cookie is set. Gives back the credential ID register() returned."""
    if not first:
        driver.remove_virtual_authenticator()
    driver.add_virtual_authenticator(authenticator_options())
    driver.delete_all_cookies()
    driver.get(server.origin + "/seed.html")
    registered = run(driver, manager("register(args[0], args[1])"), username, f"Seed Person {username}")
    assert registered["ok"], (f"register, user {username}", registered, answers(driver))
    assert registered["value"]["success"] is True, (f"register, user {username}", registered)
    credential_id = registered["value"]["credentialId"]
    assert credential_id and len(driver.get_credentials()) == 1
    assert signed_in_as(driver) == username, f"register, user {username}: GET /api/auth/session"
    return credential_id


def assert_options_decode_with_atob(driver):
    """Every challenge, user id and credential id the server sent in options decodes with atob."""
    for answer in answers(driver):
        if "/options" not in answer["url"]:
            continue
        assert answer["status"] == 200, answer
        sent = json.loads(answer["text"])
        ids = [("challenge", sent["challenge"])]
        if "user" in sent:
            ids.append(("user.id", sent["user"]["id"]))
        ids += [("excludeCredentials.id", c["id"]) for c in sent.get("excludeCredentials", [])]
        ids += [("allowCredentials.id", c["id"]) for c in sent.get("allowCredentials", [])]
        for name, value in ids:
            assert atob_decodes(value), f"{answer['method']} {answer['url']}: {name} {value!r} is not what atob decodes"
    driver.execute_script("window.seedAnswers = []")


def test_the_guide_client_registers_and_signs_in_unmodified(seed_server, browser):
    server = seed_server
    open_seed_page(browser, server)
    for number in range(USERS):
        username = f"seed{number:02d}"
        where = lambda flow: f"{flow}, user {username}"

        # 1. Registration.
        register_fresh(browser, server, username, first=number == 0)
        assert browser.execute_script("return document.querySelector('input[name=username]').getAttribute('autocomplete')") == "username webauthn"

        # 2. hasPasskeys: true for the person, false for a name nobody has.
        has = run(browser, manager("hasPasskeys(args[0])"), username)
        assert has == {"ok": True, "value": True}, (where("hasPasskeys"), has, answers(browser)[-1:])
        unknown = run(browser, manager("hasPasskeys(args[0])"), f"nobody{number:02d}")
        assert unknown == {"ok": True, "value": False}, (where("hasPasskeys of an unknown name"), unknown)

        # 3. Username-first sign-in (the server names the person's passkeys in allowCredentials).
        sign_out(browser)
        before = len(browser.execute_script("return window.seedMediations"))
        signed = run(browser, manager("authenticate(args[0])"), username)
        assert signed["ok"], (where("authenticate(username)"), signed, answers(browser)[-2:])
        assert signed["value"]["success"] is True and signed["value"]["token"], (where("authenticate(username)"), signed)
        assert signed["value"]["user"]["username"] == username
        assert signed_in_as(browser) == username, where("authenticate(username): GET /api/auth/session")
        options = last_options(browser, "/authenticate/options?username=")
        assert [c["id"] for c in options["allowCredentials"]], (where("authenticate options"), options)
        assert browser.execute_script("return window.seedMediations")[before:] == ["optional"]

        # 4. AutoFill: no username, so no allowCredentials, so the class asks with conditional
        # mediation; Chromium's automation completes it with the authenticator's passkey.
        sign_out(browser)
        before = len(browser.execute_script("return window.seedMediations"))
        autofilled = run(browser, manager("authenticate(null)"))
        assert autofilled["ok"], (where("authenticate(null)"), autofilled, answers(browser)[-2:])
        assert autofilled["value"]["success"] is True and autofilled["value"]["token"], (where("authenticate(null)"), autofilled)
        assert signed_in_as(browser) == username, where("authenticate(null): GET /api/auth/session")
        assert last_options(browser, "/authenticate/options")["allowCredentials"] == []
        assert browser.execute_script("return window.seedMediations")[before:] == ["conditional"], where("AutoFill mediation")

        assert_options_decode_with_atob(browser)


def answers(driver):
    return driver.execute_script("return window.seedAnswers")


def last_options(driver, path):
    matching = [a for a in answers(driver) if path in a["url"] and a["method"] == "GET"]
    assert matching, f"no GET answer of {path} was recorded: {answers(driver)}"
    return json.loads(matching[-1]["text"])


# ---------------------------------------------------------------------------------------------
# GET /api/auth/passkeys/check is guarded like sign-up

@pytest.fixture(scope="module")
def strict_server():
    """Four ceremony requests per address a minute."""
    server = Server(PASSKEYD_RATE_LIMIT_PER_IP="4", PASSKEYD_RATE_LIMIT_WINDOW="60")
    yield server
    server.stop()


def test_the_passkey_check_is_rate_limited_with_sign_up_and_same_site_only(strict_server):
    server = strict_server
    check = f"{server.origin}/api/auth/passkeys/check"
    # A cross-site no-cors request (no allowed Origin) is refused before anything is counted.
    for headers in ({"Sec-Fetch-Site": "cross-site"},
                    {"Sec-Fetch-Site": "cross-site", "Origin": "https://attacker.example"}):
        refused = requests.get(check, params={"username": "ada"}, headers=headers, timeout=10)
        assert refused.status_code == 403, (headers, refused.status_code, refused.text)
        assert refused.json()["error"]["code"] == "cross_site_request", refused.text
    # The check and sign-up share one per-address budget: 2 + 2 pass, then both are refused.
    same_site = {"Sec-Fetch-Site": "same-origin", "Origin": server.origin}
    for name in ("ada", "bea"):
        asked = requests.get(check, params={"username": name}, headers=same_site, timeout=10)
        assert asked.status_code == 200 and asked.json() == {"hasPasskeys": False}, (asked.status_code, asked.text)
    for name in ("cy", "dee"):
        signup = requests.post(f"{server.origin}/api/auth/register/options", json={"username": name}, headers=same_site, timeout=10)
        assert signup.status_code == 200, (signup.status_code, signup.text)
    limited = requests.get(check, params={"username": "eve"}, headers=same_site, timeout=10)
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited", (limited.status_code, limited.text)
    assert limited.headers.get("Retry-After"), limited.headers
    signup = requests.post(f"{server.origin}/api/auth/register/options", json={"username": "fay"}, headers=same_site, timeout=10)
    assert signup.status_code == 429, (signup.status_code, signup.text)


# ---------------------------------------------------------------------------------------------
# A second passkey, sign-in with both, deletion (last: the other flows report first under -x)

def base64url(sent):
    """The base64url (unpadded) form of an ID the server sent in the form `atob` decodes."""
    return sent.rstrip("=").replace("+", "-").replace("/", "_")


def full_characters(sent):
    """How many characters of an ID's base64url form carry six random bits: only those can be
    `-` or `_` (62, 63); the last, partial character of a 16- or 32-byte ID never is."""
    return len(base64.b64decode(sent + "=" * (-len(sent) % 4))) * 8 // 6


def options_answers(driver, since, path, method):
    return [json.loads(a["text"]) for a in answers(driver)[since:] if path in a["url"] and a["method"] == method]


def test_the_guide_client_adds_a_second_passkey_signs_in_and_deletes_unmodified(seed_server, browser):
    """Flows 5 and 6, all with the guide's own methods: signed in after register(), the person
    adds a second passkey from another device (a second virtual authenticator) with the same
    register(). Its register/options carries excludeCredentials with the first passkey's ID,
    which the authenticator chose: in base64url about half such IDs hold `-` or `_`, which the
    guide's `window.atob` refuses, so the server answers this browser (it finished a ceremony the
    guide's way) in standard base64. Then authenticate(username) (allowCredentials: both IDs),
    and deletePasskey(the first ID) → true; deleting the last one → false (409 last_passkey:
    passkeyd never leaves an account with no way in).

    Not vacuous: the IDs sent in excludeCredentials/allowCredentials must include one with `+`
    or `/` (`-`/`_` in base64url). Each base64url character that carries six random bits is `-`
    or `_` with probability 2/64. Chromium's virtual authenticator picks 32-byte IDs (42 such
    characters: none of the two in an ID with probability (31/32)^42 ≈ 0.26); USERS people bring
    2·USERS distinct IDs, so a run without any has probability (31/32)^(42·2·USERS) ≈ 1.3e-14
    for 12 people (still 1.1e-7 were the IDs only 16 bytes: 21 characters each). The test
    computes that bound from the IDs it saw and fails unless it is below 1e-6."""
    server = seed_server
    open_seed_page(browser, server)
    sent_ids = {}  # the credential ID (base64url) → the form the server sent it in
    for number in range(USERS):
        # Random names (the user handles and credential IDs are random already).
        username = f"two{number:02d}{secrets.token_hex(4)}"
        where = lambda flow: f"{flow}, user {username}"
        first = register_fresh(browser, server, username, first=number == 0)

        # Second passkey, on another device, with the guide's register() while signed in.
        browser.remove_virtual_authenticator()
        browser.add_virtual_authenticator(authenticator_options())
        since = len(answers(browser))
        added = run(browser, manager("register(args[0], args[1])"), username, f"Seed Person {username}")
        said = "; ".join(f"{a['method']} {a['url']} → {a['status']} {a['text']}" for a in answers(browser)[since:])
        assert added["ok"] and added["value"]["success"] is True, (
            f"{where('second passkey with the guide register() while signed in')}: {added}; the server answered: {said}")
        second = added["value"]["credentialId"]
        assert second != first and len(browser.get_credentials()) == 1, where("second passkey")
        assert signed_in_as(browser) == username, where("second passkey: GET /api/auth/session")
        creation = options_answers(browser, since, "/register/options", "POST")
        assert len(creation) == 1, (where("register/options of the second passkey"), said)
        excluded = [c["id"] for c in creation[0].get("excludeCredentials", [])]
        assert [base64url(i) for i in excluded] == [first], (where("excludeCredentials names the first passkey"), excluded, first)
        sent_ids.update({base64url(i): i for i in excluded})
        # The IDs atob decoded are the passkeys' own: this device, asked again, finds its passkey
        # among excludeCredentials and refuses (the guide's message for InvalidStateError).
        again = run(browser, manager("register(args[0], args[1])"), username, f"Seed Person {username}")
        assert again == {"ok": False, "error": "Error: A passkey already exists for this account"}, (where("a third passkey on the same device"), again)
        assert len(browser.get_credentials()) == 1

        # Username-first sign-in: allowCredentials lists both passkeys.
        sign_out(browser)
        since = len(answers(browser))
        signed = run(browser, manager("authenticate(args[0])"), username)
        assert signed["ok"], (where("authenticate(username) with two passkeys"), signed, answers(browser)[since:])
        assert signed["value"]["success"] is True and signed["value"]["user"]["username"] == username, (where("authenticate"), signed)
        assert signed_in_as(browser) == username, where("authenticate(username): GET /api/auth/session")
        allowed = [c["id"] for c in last_options(browser, "/authenticate/options?username=")["allowCredentials"]]
        assert sorted(base64url(i) for i in allowed) == sorted([first, second]), (where("allowCredentials"), allowed, first, second)
        sent_ids.update({base64url(i): i for i in allowed})

        # Deletion: the first passkey (its device is gone), then the last one is kept.
        since = len(answers(browser))
        deleted = run(browser, manager("deletePasskey(args[0])"), first)
        said = "; ".join(f"{a['method']} {a['url']} → {a['status']} {a['text']}" for a in answers(browser)[since:])
        assert deleted == {"ok": True, "value": True}, (
            f"{where('deletePasskey')}: the guide's deletePasskey gave {deleted['value'] if deleted['ok'] else deleted}; "
            f"the server answered: {said}")
        listed = fetch(browser, "/api/auth/passkeys")
        assert listed["status"] == 200 and [p["id"] for p in listed["json"]["passkeys"]] == [second], (
            where("GET /api/auth/passkeys after deletion"), listed)
        still = run(browser, manager("hasPasskeys(args[0])"), username)
        assert still == {"ok": True, "value": True}, (where("hasPasskeys after deleting one of two"), still)
        last = run(browser, manager("deletePasskey(args[0])"), second)
        assert last == {"ok": True, "value": False}, (where("deleting the last passkey is refused"), last)
        assert_options_decode_with_atob(browser)

    # Each ID sent is the credential's own bytes, and the run was not vacuous.
    assert len(sent_ids) == 2 * USERS, sorted(sent_ids)
    for credential_id, sent in sent_ids.items():
        assert base64.b64decode(sent + "=" * (-len(sent) % 4), validate=True) == \
            base64.urlsafe_b64decode(credential_id + "=" * (-len(credential_id) % 4)), (credential_id, sent)
    none_by_chance = math.prod((31 / 32) ** full_characters(sent) for sent in sent_ids.values())
    assert none_by_chance < 1e-6, (f"{USERS} people are too few: their {len(sent_ids)} credential IDs would all lack "
                                   f"'-' and '_' with probability {none_by_chance:.1e}; raise USERS")
    with_url_only = sorted(i for i, sent in sent_ids.items() if "+" in sent or "/" in sent)
    assert with_url_only, (f"no credential ID sent in excludeCredentials/allowCredentials held '-' or '_' in base64url "
                           f"(chance {none_by_chance:.1e}): the test proved nothing; {sorted(sent_ids)}")
    print(f"{len(with_url_only)} of {len(sent_ids)} credential IDs hold '-' or '_' in base64url; "
          f"none would by chance {none_by_chance:.1e}")
