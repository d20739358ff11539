"""WebAuthn extensions end to end in Chromium (issue 37): PRF keys from passkeyd.js, largeBlob,
credProps in the web UI, and the end-to-end-encrypted notes example.

Selenium's VirtualAuthenticatorOptions has no PRF, largeBlob, credBlob or minPinLength, so the
authenticator is made through the DevTools protocol (WebAuthn.addVirtualAuthenticator, reached
with execute_cdp_cmd). The page the scripts run in is passkeyd's own /passkeyd.js (the server's
origin, no app.js, so no AutoFill request competes with the ceremonies)."""
import base64
import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from selenium.webdriver.common.by import By

from conftest import ROOT, Server, free_port
from test_web import sign_up, visible, wait

# HKDF-SHA256(ikm = 0x01..0x20, salt = "passkeyd-prf-v1", info = "notes"), 32 bytes: the key
# passkeyd.js derives from that PRF output for the context "notes". PasskeyClient (Swift) pins
# the same hex; the contract is /tmp/ext-contract.md, docs/extensions.md.
KNOWN_KEY_HEX = "908aa31e3ad21ef2caacfcb8584cdb5be7974555bb3b27991b5dfa3f00d1b665"
KNOWN_IKM = bytes(range(1, 33))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def from_b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def add_authenticator(driver, **overrides):
    """A CTAP2.1 platform authenticator with every extension Chromium can emulate; returns its id."""
    driver.execute_cdp_cmd("WebAuthn.enable", {"enableUI": False})
    options = {"protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": "internal", "hasResidentKey": True,
               "hasUserVerification": True, "isUserVerified": True, "automaticPresenceSimulation": True,
               "hasPrf": True, "hasLargeBlob": True, "hasCredBlob": True, "hasMinPinLength": True}
    options.update(overrides)
    return driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": options})["authenticatorId"]


def presence(driver, authenticator, on):
    """Whether `authenticator` answers at once (off: it waits for a touch that never comes, so
    the browser takes another authenticator's answer)."""
    driver.execute_cdp_cmd("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": authenticator, "enabled": on})


def run(driver, body, *args):
    """Runs `body` (async JavaScript; `m` is the passkeyd.js module, `args` the arguments) in the
    page and returns its value, or {error, code, status} when it throws."""
    driver.set_script_timeout(60)
    script = """const done = arguments[arguments.length - 1];
        const args = Array.from(arguments).slice(0, -1);
        (async () => { const m = await import('/passkeyd.js'); %s })()
          .then(done, (e) => done({ error: String(e && e.message || e), code: e && e.code, status: e && e.status }));""" % body
    return driver.execute_async_script(script, *args)


def open_module_page(driver, origin):
    driver.get(origin + "/passkeyd.js")


@pytest.fixture(scope="module")
def ext_server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def page(ext_server, browser):
    """The server's origin in the browser with a PRF authenticator: (driver, server, authenticator)."""
    open_module_page(browser, ext_server.origin)
    authenticator = add_authenticator(browser)
    yield browser, ext_server, authenticator


# What the tests keep in the page between script calls: window.t (keys, ciphertexts, answers).
SIGN_UP = """window.t = window.t || {};
    window.client = window.client || new m.Passkeyd();
    const answer = await window.client.signUp({ username: args[0], prf: { context: 'notes' } });
    window.t.up = answer;
    return { passkey: answer.passkey, passkeyId: answer.prf.passkeyId, prf: { hasKey: !!answer.prf.key, reason: answer.prf.reason || null,
             context: answer.prf.context || null, extractable: answer.prf.key ? answer.prf.key.extractable : null,
             algorithm: answer.prf.key ? answer.prf.key.algorithm : null } };"""

SIGN_IN = """window.client = window.client || new m.Passkeyd();
    const answer = await window.client.signIn({ username: args[0], prf: { context: 'notes' }, credentialId: args[1] || undefined });
    window.t[args[2] || 'in'] = answer;
    return { passkey: answer.passkey || null, passkeyId: answer.prf.passkeyId, user: answer.user,
             prf: { hasKey: !!answer.prf.key, reason: answer.prf.reason || null } };"""


def test_the_hkdf_key_is_the_known_answer_and_the_box_format_is_the_contracts(page):
    driver, _, _ = page
    python = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"passkeyd-prf-v1", info=b"notes").derive(KNOWN_IKM)
    assert python.hex() == KNOWN_KEY_HEX
    result = run(driver, """
        const ikm = new Uint8Array(32).map((_, i) => i + 1);
        const key = await m.deriveKey(ikm, 'notes', { extractable: true });
        const raw = new Uint8Array(await crypto.subtle.exportKey('raw', key));
        const usual = await m.deriveKey(ikm, 'notes');
        const other = await m.deriveKey(ikm, 'photos', { extractable: true });
        const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
        return { hex: hex(raw), other: hex(new Uint8Array(await crypto.subtle.exportKey('raw', other))),
                 usualExtractable: usual.extractable,
                 box: await m.encrypt(usual, 'ciphertext only, please', { additionalData: 'user-1' }),
                 opened: await m.decrypt(usual, args[0], { additionalData: 'user-1', text: true }),
                 wrongData: await m.decrypt(usual, args[0], { additionalData: 'user-2' }).then(() => 'opened', (e) => e.code),
                 badContext: await m.deriveKey(ikm, '').then(() => 'derived', (e) => e.name) };
    """, b64url(bytes(12) + AESGCM(python).encrypt(bytes(12), "from Python".encode(), b"user-1")))
    assert result["hex"] == KNOWN_KEY_HEX
    assert result["other"] != KNOWN_KEY_HEX  # the context is in the key
    assert result["usualExtractable"] is False
    assert result["opened"] == "from Python"
    assert result["wrongData"] == "decryption_failed"
    assert result["badContext"] == "TypeError"
    # nonce (12) || ciphertext || tag (16), base64url: Python opens what the browser sealed.
    box = from_b64url(result["box"])
    assert len(box) == 12 + len("ciphertext only, please") + 16
    assert AESGCM(python).decrypt(box[:12], box[12:], b"user-1") == b"ciphertext only, please"


def test_sign_up_with_prf_gives_a_key_and_every_sign_in_the_same_key(page):
    driver, _, _ = page
    up = run(driver, SIGN_UP, "prf-ada")
    assert up["prf"] == {"hasKey": True, "reason": None, "context": "notes", "extractable": False,
                         "algorithm": {"name": "AES-GCM", "length": 256}}, up
    assert up["passkeyId"] == up["passkey"]["id"]
    sealed = run(driver, "window.t.box = await m.encrypt(window.t.up.prf.key, 'a note'); return window.t.box;")

    for attempt in ("first", "second"):
        assert run(driver, "await window.client.signOut(); return true;") is True
        signed_in = run(driver, SIGN_IN, "prf-ada", None, attempt)
        assert signed_in["prf"] == {"hasKey": True, "reason": None}, signed_in
        assert signed_in["passkeyId"] == up["passkeyId"]
        # The same key: what the sign-up's key sealed, this sign-in's key opens, and back.
        opened = run(driver, "return await m.decrypt(window.t[args[0]].prf.key, window.t.box, { text: true });", attempt)
        assert opened == "a note"
    back = run(driver, """const box = await m.encrypt(window.t.second.prf.key, 'and back');
        return await m.decrypt(window.t.up.prf.key, box, { text: true });""")
    assert back == "and back"
    assert sealed  # nonce and tag at least
    # The server stored the PRF support, never an output: the passkey list says prf true.
    passkeys = run(driver, "return await window.client.passkeys();")
    assert [p["prf"] for p in passkeys] == [True]


def test_a_second_passkey_on_the_account_gets_a_different_key(page):
    driver, _, first = page
    up = run(driver, SIGN_UP, "prf-bea")
    assert up["prf"]["hasKey"], up
    # The first authenticator holds an excluded passkey: it stops answering, the second one creates.
    # Chromium allows one internal authenticator per page: the second is a security key (USB).
    second = add_authenticator(driver, transport="usb")
    presence(driver, first, False)
    added = run(driver, """const answer = await window.client.addPasskey({ prf: { context: 'notes' } });
        window.t.added = answer;
        return { id: answer.prf.passkeyId, hasKey: !!answer.prf.key, reason: answer.prf.reason || null };""")
    assert added["hasKey"], added
    assert added["id"] != up["passkeyId"]
    presence(driver, first, True)
    result = run(driver, """const box = await m.encrypt(window.t.up.prf.key, 'for the first passkey only');
        return await m.decrypt(window.t.added.prf.key, box).then(() => 'opened', (e) => e.code);""")
    assert result == "decryption_failed"

    # Each passkey keeps its own key across sign-ins (credentialId picks the passkey).
    presence(driver, first, False)
    signed_in = run(driver, SIGN_IN, "prf-bea", added["id"], "second")
    presence(driver, first, True)
    assert signed_in["passkeyId"] == added["id"] and signed_in["prf"]["hasKey"]
    same = run(driver, """const box = await m.encrypt(window.t.added.prf.key, 'second passkey');
        return await m.decrypt(window.t.second.prf.key, box, { text: true });""")
    assert same == "second passkey"
    assert second


def test_without_results_at_creation_sign_up_signs_in_once_more_for_the_key(page):
    """A platform that reports prf.enabled but cannot evaluate at creation: signUp runs one
    sign-in with the new passkey (a second prompt) and its key is the passkey's usual key."""
    driver, _, _ = page
    run(driver, """window.gets = 0;
        const create = navigator.credentials.create.bind(navigator.credentials);
        navigator.credentials.create = async (options) => {
          const credential = await create(options);
          const results = credential.getClientExtensionResults();
          const withoutOutput = { ...results, prf: { enabled: true } };
          credential.getClientExtensionResults = () => withoutOutput;
          return credential;
        };
        const get = navigator.credentials.get.bind(navigator.credentials);
        navigator.credentials.get = (options) => { window.gets += 1; return get(options); };
        return true;""")
    up = run(driver, SIGN_UP, "prf-cid")
    assert up["prf"]["hasKey"], up
    assert run(driver, "return window.gets;") == 1
    run(driver, "await window.client.signOut(); return true;")
    run(driver, SIGN_IN, "prf-cid", None, "later")
    assert run(driver, """const box = await m.encrypt(window.t.up.prf.key, 'same key');
        return await m.decrypt(window.t.later.prf.key, box, { text: true });""") == "same key"


def test_the_extensions_reach_the_authenticator_without_the_browsers_json_parsers(page):
    """The manual path (browsers without parse…FromJSON) turns prf.eval, evalByCredential and
    largeBlob.write into bytes itself."""
    driver, _, _ = page
    run(driver, """delete PublicKeyCredential.parseCreationOptionsFromJSON;
        delete PublicKeyCredential.parseRequestOptionsFromJSON;
        PublicKeyCredential.parseCreationOptionsFromJSON = undefined;
        PublicKeyCredential.parseRequestOptionsFromJSON = undefined;
        return true;""")
    up = run(driver, SIGN_UP, "prf-dan")
    assert up["prf"]["hasKey"], up
    run(driver, "await window.client.signOut(); return true;")
    signed_in = run(driver, SIGN_IN, "prf-dan", None, "manual")
    assert signed_in["prf"]["hasKey"], signed_in
    assert run(driver, """const box = await m.encrypt(window.t.up.prf.key, 'manual');
        return await m.decrypt(window.t.manual.prf.key, box, { text: true });""") == "manual"


def test_the_answers_name_the_passkey_and_what_its_extensions_reported(page):
    """The contract's members: the sign-up answer's passkey carries discoverable, prf,
    credProtect, largeBlob and minPinLength (as the passkey list does), and a sign-in's prf
    answer names the passkey that signed (from the credential itself: the server's sign-in
    answer names only its stored PRF fact, prfEnabled, so a sign-in costs what it did)."""
    driver, _, _ = page
    up = run(driver, SIGN_UP, "facts-ivy")
    listed = run(driver, "return await window.client.passkeys();")
    facts = ("discoverable", "prf", "credProtect", "largeBlob", "minPinLength")
    assert listed[0]["discoverable"] is True and listed[0]["prf"] is True
    assert {name: up["passkey"].get(name) for name in facts} == {name: listed[0].get(name) for name in facts}
    run(driver, "await window.client.signOut(); return true;")
    signed_in = run(driver, SIGN_IN, "facts-ivy", None, "in")
    assert signed_in["passkeyId"] == up["passkeyId"] == listed[0]["id"]
    assert run(driver, "return window.t.in.prfEnabled;") is True


# Records what the browser's get() answered in `prf` (window.gets: each answer's prf member).
RECORD_GETS = """window.gets = [];
    const get = navigator.credentials.get.bind(navigator.credentials);
    navigator.credentials.get = async (options) => {
      const credential = await get(options);
      const prf = credential.getClientExtensionResults().prf;
      window.gets.push(prf === undefined ? 'absent' : Object.keys(prf).sort());
      return credential;
    };
    return true;"""


def test_a_passkey_without_prf_is_unsupported_at_sign_in_never_not_evaluated(page):
    """A passkey whose authenticator has no PRF (hasPrf false), asked for PRF at sign-in:
    Chromium answers `prf: {}` (no output, no `enabled`), which looked like a passkey not
    evaluated this time, and an app prompting again on `not-evaluated` (as the docs say) looped
    for ever. The server's stored fact (registered with `prf.enabled: false`) makes it
    `unsupported`, every time."""
    driver, _, authenticator = page
    driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})
    add_authenticator(driver, hasPrf=False)
    up = run(driver, SIGN_UP, "noprf-kai")
    assert up["prf"]["reason"] == "unsupported", up
    assert up["passkey"]["prf"] is False
    run(driver, RECORD_GETS)
    for attempt in ("first", "again"):
        run(driver, "await window.client.signOut(); return true;")
        signed_in = run(driver, SIGN_IN, "noprf-kai", None, attempt)
        assert signed_in["prf"] == {"hasKey": False, "reason": "unsupported"}, signed_in
        assert signed_in["passkeyId"] == up["passkeyId"]
        assert run(driver, "return window.t[args[0]].prfEnabled;", attempt) is False
    # What Chromium gave: a prf member with nothing in it, the case the stored fact settles.
    assert run(driver, "return window.gets;") == [[], []]


def test_a_passkey_with_prf_that_gave_no_output_is_not_evaluated(page):
    """`not-evaluated` stays for what it means: the passkey has PRF (the server's fact) and the
    browser gave no output this time (here its output is taken away, as a hybrid sign-in on
    some platforms does); the next sign-in gives the key."""
    driver, _, _ = page
    up = run(driver, SIGN_UP, "prf-lee")
    assert up["prf"]["hasKey"], up
    run(driver, """const get = navigator.credentials.get.bind(navigator.credentials);
        window.dropOutput = true;
        navigator.credentials.get = async (options) => {
          const credential = await get(options);
          if (!window.dropOutput) return credential;
          const results = { ...credential.getClientExtensionResults(), prf: {} };
          credential.getClientExtensionResults = () => results;
          return credential;
        };
        return true;""")
    run(driver, "await window.client.signOut(); return true;")
    missed = run(driver, SIGN_IN, "prf-lee", None, "missed")
    assert missed["prf"] == {"hasKey": False, "reason": "not-evaluated"}, missed
    run(driver, "window.dropOutput = false; await window.client.signOut(); return true;")
    again = run(driver, SIGN_IN, "prf-lee", None, "again")
    assert again["prf"] == {"hasKey": True, "reason": None}, again


def test_a_posted_prf_output_is_refused(page):
    """A client that posts the PRF output (here: the browser's toJSON() as it is) gets 400
    prf_output_posted, and no session."""
    driver, server, _ = page
    run(driver, SIGN_UP, "prf-eve")
    run(driver, "await window.client.signOut(); return true;")
    answer = run(driver, """
        const post = async (path, body) => {
          const response = await fetch(path, { method: 'POST', credentials: 'include',
            headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
          return { status: response.status, json: await response.json() };
        };
        const options = await post('/api/auth/authenticate/options', { username: 'prf-eve', extensions: { prf: true } });
        const credential = await navigator.credentials.get({ publicKey: m.requestOptionsFromJSON(options.json) });
        const json = m.credentialToJSON(credential);
        const posted = await post('/api/auth/authenticate/verify', { credential: json });
        const session = await fetch('/api/auth/session', { credentials: 'include' });
        return { hadOutput: !!(json.clientExtensionResults.prf && json.clientExtensionResults.prf.results),
                 status: posted.status, code: posted.json.error && posted.json.error.code, session: session.status };""")
    assert answer["hadOutput"] is True
    assert (answer["status"], answer["code"]) == (400, "prf_output_posted")
    assert answer["session"] == 401

    # The same at sign-up (Chromium evaluates PRF at creation): refused, and no account made.
    answer = run(driver, """
        const post = async (path, body) => {
          const response = await fetch(path, { method: 'POST', credentials: 'include',
            headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
          return { status: response.status, json: await response.json() };
        };
        const options = await post('/api/auth/register/options', { username: 'prf-eve-2', extensions: { prf: true } });
        const credential = await navigator.credentials.create({ publicKey: m.creationOptionsFromJSON(options.json) });
        const json = m.credentialToJSON(credential);
        const posted = await post('/api/auth/register/verify', { credential: json });
        const again = await post('/api/auth/register/options', { username: 'prf-eve-2' });
        return { hadOutput: !!(json.clientExtensionResults.prf && json.clientExtensionResults.prf.results),
                 status: posted.status, code: posted.json.error && posted.json.error.code, again: again.status };""")
    assert answer["hadOutput"] is True
    assert (answer["status"], answer["code"]) == (400, "prf_output_posted")
    assert answer["again"] == 200  # the username is still free


def test_a_rotated_salt_gives_the_passkey_a_new_key(page):
    driver, _, _ = page
    up = run(driver, SIGN_UP, "salt-jo")
    assert up["prf"]["hasKey"], up
    # client.rotatePRFSalt (POST /api/auth/passkeys/{id}/prf-salt) answers the passkey.
    rotated = run(driver, "return await window.client.rotatePRFSalt(args[0]);", up["passkeyId"])
    assert rotated.get("id") == up["passkeyId"] and rotated.get("prf") is True, rotated
    unknown = run(driver, "return await window.client.rotatePRFSalt('AAAA');")
    assert (unknown.get("status"), unknown.get("code")) == (404, "passkey_not_found"), unknown
    run(driver, "await window.client.signOut(); return true;")
    run(driver, SIGN_IN, "salt-jo", None, "rotated")
    assert run(driver, """const box = await m.encrypt(window.t.up.prf.key, 'old key');
        return await m.decrypt(window.t.rotated.prf.key, box).then(() => 'opened', (e) => e.code);""") == "decryption_failed"
    # …and the new key is stable again.
    run(driver, "await window.client.signOut(); return true;")
    run(driver, SIGN_IN, "salt-jo", None, "again")
    assert run(driver, """const box = await m.encrypt(window.t.rotated.prf.key, 'new key');
        return await m.decrypt(window.t.again.prf.key, box, { text: true });""") == "new key"


def test_decrypting_binary_data_as_text_is_refused_with_not_text(page):
    """GCM opened the box, so the bytes are the ones encrypted: bytes that are not UTF-8 were
    never text. `text: true` on them rejects with PasskeydError not_text; without it, the bytes."""
    driver, _, _ = page
    result = run(driver, """
        const key = await m.deriveKey(new Uint8Array(32).fill(9), 'notes');
        const box = await m.encrypt(key, new Uint8Array([0xff, 0xfe, 0x00, 0x80]));
        const bytes = Array.from(await m.decrypt(key, box));
        const asText = await m.decrypt(key, box, { text: true }).then((text) => ({ text }),
          (e) => ({ name: e.name, code: e.code, message: e.message, typed: e instanceof m.PasskeydError }));
        const text = await m.decrypt(key, await m.encrypt(key, 'déjà vu'), { text: true });
        return { bytes, asText, text };""")
    assert result["bytes"] == [0xFF, 0xFE, 0x00, 0x80]
    refused = result["asText"]
    assert (refused.get("name"), refused.get("code"), refused.get("typed")) == ("PasskeydError", "not_text", True), refused
    assert refused["message"] and not refused["message"].startswith("error."), refused
    assert result["text"] == "déjà vu"


def test_the_module_functions_errors_are_in_the_pages_language(page):
    """decrypt and unwrapKey know no client: their PasskeydError speaks the page's languages
    (navigator.languages), from the catalogue next to passkeyd.js."""
    driver, _, _ = page
    french = json.loads((ROOT / "Public" / "i18n" / "fr.json").read_text(encoding="utf-8"))
    result = run(driver, """
        Object.defineProperty(navigator, 'languages', { get: () => ['fr-CA', 'en'], configurable: true });
        const key = await m.deriveKey(new Uint8Array(32).fill(9), 'notes');
        const other = await m.deriveKey(new Uint8Array(32).fill(8), 'notes', { extractable: true });
        const failed = (e) => ({ code: e.code, message: e.message });
        return {
          decrypt: await m.decrypt(other, await m.encrypt(key, 'secret')).then(() => 'opened', failed),
          unwrap: await m.unwrapKey(key, await m.wrapKey(other, other)).then(() => 'unwrapped', failed) };""")
    expected = {"code": "decryption_failed", "message": french["error.decryption_failed"]}
    assert result == {"decrypt": expected, "unwrap": expected}


def test_large_blob_write_then_read_and_the_cap(page):
    driver, _, _ = page
    up = run(driver, """window.client = new m.Passkeyd(); window.t = {};
        await window.client.signUp({ username: 'blob-fay', largeBlob: 'required' });
        return (await window.client.passkeys())[0];""")
    assert up["largeBlob"] is True, up
    written = run(driver, """return (await window.client.writeLargeBlob({ username: 'blob-fay', credentialId: args[0],
        data: 'kept on the passkey' })).written;""", up["id"])
    assert written is True
    read = run(driver, """const { blob } = await window.client.readLargeBlob({ username: 'blob-fay' });
        return blob === null ? null : new TextDecoder().decode(blob);""")
    assert read == "kept on the passkey"
    # Above the cap (1024 by default): refused before any ceremony; a write names its passkey.
    too_large = run(driver, "return await window.client.writeLargeBlob({ username: 'blob-fay', credentialId: args[0], data: new Uint8Array(1025) });", up["id"])
    assert (too_large.get("status"), too_large.get("code")) == (400, "large_blob_too_large")
    unnamed = run(driver, "return await window.client.writeLargeBlob({ username: 'blob-fay', data: 'x' });")
    assert (unnamed.get("status"), unnamed.get("code")) == (400, "invalid_extension")


@pytest.fixture(scope="module")
def cred_protect_server():
    """credProtect level 3 asked of every new passkey, required of device-bound ones (the default
    scope, credentialProtectionRequiredFor: device-bound)."""
    s = Server(PASSKEYD_CREDENTIAL_PROTECTION="3")
    yield s
    s.stop()


# An authenticator without credProtect: CTAP 2.0 (Chromium's virtual authenticator has the
# extension from CTAP 2.1 on, and DevTools has no switch for it alone).
WITHOUT_CRED_PROTECT = {"ctap2Version": "ctap2_0", "hasPrf": False, "hasLargeBlob": False, "hasCredBlob": False,
                        "hasMinPinLength": False}

SIGN_UP_PLAIN = """const client = new m.Passkeyd();
    const answer = await client.signUp({ username: args[0] });
    await client.signOut();
    return answer.passkey;"""


def test_the_default_cred_protect_policy_leaves_synced_passkeys_to_the_server(cred_protect_server, browser):
    """Under the default scope the options no longer say enforceCredentialProtectionPolicy: true,
    which made Chromium refuse every authenticator without credProtect (synced passkeys'
    providers among them) and the person saw `cancelled`. The server judges instead: a synced
    passkey without credProtect signs up, a device-bound one is refused with its own code, and a
    security key with credProtect gets level 3."""
    driver = browser
    open_module_page(driver, cred_protect_server.origin)
    # With enforcement Chromium refused this authenticator at once (NotAllowedError: `cancelled`).
    synced = add_authenticator(driver, **WITHOUT_CRED_PROTECT, defaultBackupEligibility=True, defaultBackupState=True)
    passkey = run(driver, SIGN_UP_PLAIN, "cp-synced")
    assert passkey.get("error") is None, passkey
    assert passkey["backupEligible"] is True and "credProtect" not in passkey, passkey
    driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": synced})
    options = run(driver, """const response = await fetch('/api/auth/register/options', { method: 'POST',
        headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'cp-options' }) });
        return (await response.json()).extensions;""")
    assert options["credentialProtectionPolicy"] == "userVerificationRequired"
    assert options.get("enforceCredentialProtectionPolicy") is not True, options

    bound = add_authenticator(driver, **WITHOUT_CRED_PROTECT)
    refused = run(driver, SIGN_UP_PLAIN, "cp-bound")
    assert (refused.get("status"), refused.get("code")) == (403, "credential_protection_not_applied"), refused
    driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": bound})

    add_authenticator(driver, transport="usb")
    key = run(driver, SIGN_UP_PLAIN, "cp-key")
    assert key.get("error") is None, key
    assert key["backupEligible"] is False and key["credProtect"] == 3, key


def test_the_passkey_list_shows_discoverable_and_prf(ext_server, browser):
    """credProps' rk, as the authenticator reported it, in the UI's passkey list; and what the
    other extensions reported, for a passkey made with PRF and largeBlob."""
    browser.get(ext_server.origin + "/#signup")
    add_authenticator(browser)
    sign_up(browser, ext_server, "rk-gus")
    item = wait(browser).until(lambda d: d.find_element(By.CSS_SELECTOR, "#passkey-list .passkey"))
    badge = item.find_element(By.CSS_SELECTOR, ".passkey-discoverable")
    assert badge.is_displayed() and badge.text == "Discoverable"
    passkeys = browser.execute_async_script("""const done = arguments[arguments.length - 1];
        fetch('/api/auth/passkeys', { credentials: 'include' }).then((r) => r.json()).then((j) => done(j.passkeys));""")
    assert passkeys[0]["discoverable"] is True
    # passkeyd asks for residentKey "required", so a browser's passkey is always discoverable;
    # rk false (a credential the server must name) comes from native clients only.

    # A passkey made with PRF and largeBlob (through passkeyd.js): the list says so.
    browser.execute_async_script("""const done = arguments[arguments.length - 1];
        fetch('/api/auth/session', { method: 'DELETE', credentials: 'include' }).then(() => done());""")
    open_module_page(browser, ext_server.origin)
    run(browser, "await new m.Passkeyd().signUp({ username: 'rk-hana', prf: true, largeBlob: 'preferred' }); return true;")
    browser.get(ext_server.origin + "/#account")
    item = wait(browser).until(lambda d: d.find_element(By.CSS_SELECTOR, "#passkey-list .passkey"))
    capabilities = item.find_element(By.CSS_SELECTOR, ".passkey-capabilities")
    assert capabilities.is_displayed()
    assert "Encryption keys (PRF)" in capabilities.text and "Store data (largeBlob)" in capabilities.text
    assert item.find_element(By.CSS_SELECTOR, ".passkey-discoverable").text == "Discoverable"


# MARK: the E2EE notes example

class NotesApp:
    """Examples/E2EENotes/server.py on a free port, next to a passkeyd that lists its origin."""

    def __init__(self):
        self.port = free_port()
        self.origin = f"http://localhost:{self.port}"
        self.passkeyd = Server(extra_origins=[self.origin])
        self.directory = tempfile.mkdtemp(prefix="e2ee-notes-")
        self.database = os.path.join(self.directory, "notes.sqlite")
        self.log = open(os.path.join(self.directory, "notes.log"), "w")
        self.process = subprocess.Popen([sys.executable, str(ROOT / "Examples" / "E2EENotes" / "server.py"),
                                         "--passkeyd", f"http://127.0.0.1:{self.passkeyd.port}",
                                         "--listen", f"127.0.0.1:{self.port}", "--database", self.database],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the notes example did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()
        self.passkeyd.stop()


@pytest.fixture(scope="module")
def notes_app():
    app = NotesApp()
    yield app
    app.stop()


def status(driver):
    return driver.find_element(By.ID, "status").text


def notes_page(driver, app):
    driver.get(app.origin + "/")
    wait(driver).until(lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def account_form(driver, username, button):
    field = driver.find_element(By.ID, "username")
    field.clear()
    field.send_keys(username)
    driver.find_element(By.ID, button).click()


def test_the_notes_example_stores_only_ciphertext_and_a_fresh_sign_in_decrypts(notes_app, browser):
    driver = browser
    notes_page(driver, notes_app)
    first = add_authenticator(driver)
    secret = "Meet at the lighthouse at 6, bring the blue notebook"
    account_form(driver, "notes-hal", "sign-up")
    visible(driver, "unlocked")
    driver.find_element(By.ID, "note").send_keys(secret)
    driver.find_element(By.ID, "save").click()
    wait(driver).until(lambda d: status(d).startswith("Saved"))

    # The database holds ciphertext and one wrapped key: neither the note nor any key.
    raw = pathlib.Path(notes_app.database).read_bytes()
    for suffix in ("-wal", "-journal"):
        extra = pathlib.Path(notes_app.database + suffix)
        if extra.exists():
            raw += extra.read_bytes()
    assert secret.encode() not in raw and b"lighthouse" not in raw
    with sqlite3.connect(notes_app.database) as db:
        (ciphertext,) = db.execute("SELECT ciphertext FROM notes").fetchone()
        keys = db.execute("SELECT passkey_id, wrapped FROM wrapped_keys").fetchall()
    assert len(ciphertext) == 12 + len(secret.encode()) + 16
    assert len(keys) == 1 and len(keys[0][1]) == 60

    # A reload forgets every key: the page is signed in but locked; a passkey sign-in unlocks.
    notes_page(driver, notes_app)
    visible(driver, "locked")
    driver.find_element(By.ID, "unlock").click()
    visible(driver, "unlocked")
    assert driver.find_element(By.ID, "note").get_attribute("value") == secret

    # A second passkey enrolled on the same account opens the same note with its own key.
    add_authenticator(driver, transport="usb")
    presence(driver, first, False)
    driver.find_element(By.ID, "enroll").click()
    wait(driver, 30).until(lambda d: status(d).startswith("Added passkey"))
    with sqlite3.connect(notes_app.database) as db:
        wrapped = dict(db.execute("SELECT passkey_id, wrapped FROM wrapped_keys").fetchall())
    assert len(wrapped) == 2 and len(set(wrapped.values())) == 2
    second_id = next(pid for pid in wrapped if pid != keys[0][0])

    # Signed out and in again (a fresh page), only the second passkey answering: the note opens.
    driver.find_elements(By.CSS_SELECTOR, "#unlocked .sign-out")[0].click()
    visible(driver, "signed-out")
    notes_page(driver, notes_app)
    account_form(driver, "notes-hal", "sign-in")
    visible(driver, "unlocked")
    assert driver.find_element(By.ID, "passkey-id").text == second_id
    assert driver.find_element(By.ID, "note").get_attribute("value") == secret


def test_the_notes_api_refuses_without_a_session_and_from_another_origin(notes_app):
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(notes_app.origin.replace("localhost", "127.0.0.1") + "/notes", timeout=5)
    assert refused.value.code == 401
    request = urllib.request.Request(notes_app.origin.replace("localhost", "127.0.0.1") + "/notes", method="PUT",
                                     data=json.dumps({"note": b64url(bytes(40))}).encode(),
                                     headers={"Content-Type": "application/json", "Origin": "http://localhost:1"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 403


def wrapped_for(app):
    with sqlite3.connect(app.database) as db:
        return {row[0] for row in db.execute("SELECT passkey_id FROM wrapped_keys")}


NOTES_FETCH = """const response = await fetch(args[1], { method: args[0], credentials: 'same-origin' });
    const text = await response.text();
    return { status: response.status, code: text ? (JSON.parse(text).error || {}).code || null : null };"""


def test_the_notes_example_removes_a_passkeys_wrapped_key_with_it(notes_app, browser):
    """A removed passkey's wrapped data key goes with it: removed from the page (its wrap at
    once), or on passkeyd directly (at the next read of the notes); DELETE /keys/<id> forgets
    one (it was 404, and PUT too once the passkey was gone, so a stale wrap stayed for good);
    the only passkey that opens the notes is kept (409 last_key)."""
    driver = browser
    others = wrapped_for(notes_app)  # the module's other accounts'

    def mine():
        return wrapped_for(notes_app) - others

    notes_page(driver, notes_app)
    first = add_authenticator(driver)
    account_form(driver, "notes-kim", "sign-up")
    visible(driver, "unlocked")
    driver.find_element(By.ID, "note").send_keys("kept through every removal")
    driver.find_element(By.ID, "save").click()
    wait(driver).until(lambda d: status(d).startswith("Saved"))
    (a,) = mine()
    # The only passkey that opens the notes: neither its key nor the passkey can go.
    assert run(driver, NOTES_FETCH, "DELETE", "/keys/" + a) == {"status": 409, "code": "last_key"}
    assert run(driver, NOTES_FETCH, "DELETE", "/api/auth/passkeys/" + a) == {"status": 409, "code": "last_key"}
    assert mine() == {a}

    authenticators = [first]

    def only(answering):
        """Only `answering` (an authenticator id) answers the next ceremony."""
        for each in authenticators:
            presence(driver, each, each == answering)

    def enroll():
        """A new security key enrolled from the page; its passkey's id."""
        authenticators.append(add_authenticator(driver, transport="usb"))
        only(authenticators[-1])
        driver.find_element(By.ID, "enroll").click()
        wait(driver, 30).until(lambda d: status(d).startswith("Added passkey"))
        return status(driver).split()[2].rstrip(":")

    def remove_on_passkeyd(passkey_id):
        """Removes a passkey on passkeyd's own origin (as its account page would), then back."""
        open_module_page(driver, notes_app.passkeyd.origin)
        run(driver, "await new m.Passkeyd().deletePasskey(args[0]); return true;", passkey_id)
        notes_page(driver, notes_app)

    b = enroll()
    assert mine() == {a, b}

    # Unlocked with B, the person removes A from the page: the passkey and its wrap are gone.
    driver.find_elements(By.CSS_SELECTOR, "#unlocked .sign-out")[0].click()
    visible(driver, "signed-out")
    notes_page(driver, notes_app)
    account_form(driver, "notes-kim", "sign-in")
    visible(driver, "unlocked")
    assert driver.find_element(By.ID, "passkey-id").text == b
    item = wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, f'#passkeys li[data-id="{a}"]'))
    assert "opens these notes" in item.text
    item.find_element(By.CSS_SELECTOR, "button.remove").click()
    wait(driver).until(lambda d: status(d).startswith("Removed passkey"))
    assert mine() == {b}
    assert [p["id"] for p in run(driver, "return await new m.Passkeyd().passkeys();")] == [b]

    # C enrolled, then removed on passkeyd's own origin (its account page, the console, the CLI):
    # its wrap is left until DELETE /keys/C forgets it (404 before, and PUT refused it too).
    c = enroll()
    assert mine() == {b, c}
    remove_on_passkeyd(c)
    assert mine() == {b, c}
    assert run(driver, NOTES_FETCH, "DELETE", "/keys/" + c) == {"status": 204, "code": None}
    assert run(driver, NOTES_FETCH, "DELETE", "/keys/" + c) == {"status": 404, "code": "key_not_found"}
    assert mine() == {b}

    # D likewise, and this time the next read of the notes drops its wrap by itself.
    only(authenticators[1])
    driver.find_element(By.ID, "unlock").click()
    visible(driver, "unlocked")
    d = enroll()
    assert mine() == {b, d}
    remove_on_passkeyd(d)
    assert run(driver, NOTES_FETCH, "GET", "/notes")["status"] == 200
    assert mine() == {b}

    # B still opens the note.
    only(authenticators[1])
    driver.find_element(By.ID, "unlock").click()
    visible(driver, "unlocked")
    assert driver.find_element(By.ID, "note").get_attribute("value") == "kept through every removal"
