"""passkeyd.js from another origin, as a site that embeds it meets it: a page on a second origin
imports the module from the passkeyd server (`import … from 'http://localhost:PORT/passkeyd.js'`,
CORS) and signs up, signs in (username-first, discoverable, AutoFill), manages passkeys, and gets
typed errors with sentences in its language. A page on an unlisted origin cannot load it."""
import json

import pytest

from conftest import ROOT, Server, authenticator_options, free_port, serve_page

CATALOGUES = {language: json.loads((ROOT / "Public" / "i18n" / f"{language}.json").read_text(encoding="utf-8"))
              for language in ("en", "fr")}

APP_PAGE = """<!doctype html><meta charset="utf-8"><title>an app on another origin</title>
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<p id="status">loading</p>
<script type="module">
import * as passkeyd from %(module)s;
window.passkeyd = passkeyd;
document.getElementById('status').textContent = 'ready';
</script>"""

BLOCKED_PAGE = """<!doctype html><meta charset="utf-8"><p id="status">loading</p>
<script type="module">
const say = (text) => { document.getElementById('status').textContent = text; };
import(%(module)s).then(() => say('loaded'), (error) => say('blocked ' + error.name));
</script>"""

# Records what the page asks of the browser, and stands in for the signal methods (so they
# cannot change the virtual authenticator under the test). With `window.holdConditional`, an
# AutoFill request waits like a person who has not chosen yet, until it is aborted.
RECORDER = """
window.record = { gets: [], signals: [] };
const realGet = navigator.credentials.get.bind(navigator.credentials);
navigator.credentials.get = (options) => {
  const entry = { mediation: options.mediation || 'optional', aborted: false };
  window.record.gets.push(entry);
  if (options.signal) options.signal.addEventListener('abort', () => { entry.aborted = true; });
  if (options.mediation === 'conditional' && window.holdConditional) {
    return new Promise((resolve, reject) => options.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
  }
  return realGet(options);
};
for (const name of ['signalUnknownCredential', 'signalAllAcceptedCredentials', 'signalCurrentUserDetails']) {
  PublicKeyCredential[name] = async (details) => { window.record.signals.push({ name, details }); };
}
window.until = async (condition, ms = 10000) => {
  const end = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > end) throw new Error('timed out waiting for ' + condition);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};
"""


@pytest.fixture(scope="module")
def app():
    """passkeyd, with an app's origin (localhost, another port: the same RP ID) listed as a web
    origin (its pages run ceremonies) and a CORS origin; the app's page imports passkeyd.js."""
    port = free_port()
    origin = f"http://localhost:{port}"
    server = Server(extra_origins=[origin], PASSKEYD_CORS_ORIGINS=origin)
    httpd = serve_page(APP_PAGE % {"module": json.dumps(server.origin + "/passkeyd.js")}, port)
    yield server, origin
    httpd.shutdown()
    server.stop()


def open_app(browser, origin, recorder=True):
    browser.set_script_timeout(40)
    browser.get(origin + "/")
    browser.execute_async_script("""const done = arguments[arguments.length - 1];
        const check = () => window.passkeyd ? done() : setTimeout(check, 20); check();""")
    if recorder:
        browser.execute_script(RECORDER)


def open_with_authenticator(app, browser):
    """The app's page on its origin with a virtual authenticator attached; returns (server, origin)."""
    server, origin = app
    browser.add_virtual_authenticator(authenticator_options())
    open_app(browser, origin)
    return server, origin


def run(browser, body, *args):
    """Runs `body` (the body of an async function; `args` are its arguments, `passkeyd` the
    module) in the page: {ok: true, value} or {ok: false, error: {name, code, message, status, retryAfter}}."""
    return browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const args = Array.prototype.slice.call(arguments, 0, -1);
        const { Passkeyd, PasskeydError } = window.passkeyd;
        (async (...args) => { %s })(...args).then(
            (value) => done({ ok: true, value: value === undefined ? null : value }),
            (error) => done({ ok: false, error: { name: error && error.name, code: error && error.code, message: String(error && error.message),
                                                   status: error && error.status, retryAfter: error && error.retryAfter,
                                                   typed: error instanceof PasskeydError } }));
    """ % body, *args)


def ok(answer):
    assert answer["ok"], answer
    return answer["value"]


def failed(answer):
    assert not answer["ok"], answer
    assert answer["error"]["typed"], answer
    return answer["error"]


def sign_up(browser, username):
    return ok(run(browser, "const client = new Passkeyd(); const a = await client.signUp({username: args[0], displayName: 'Person ' + args[0]});"
                           "return {user: a.user, passkey: a.passkey, hasAccessToken: typeof a.accessToken === 'string'};", username))


def sign_out(browser):
    ok(run(browser, "await new Passkeyd().signOut();"))


def swap_authenticator(browser, credentials=(), **options):
    """Takes the current virtual authenticator away (returning its passkeys) and attaches another."""
    previous = browser.get_credentials()
    browser.remove_virtual_authenticator()
    browser.add_virtual_authenticator(authenticator_options(**options))
    for credential in credentials:
        browser.add_credential(credential)
    return previous


def test_sign_up_and_sign_in_from_another_origin(app, browser):
    server, origin = open_with_authenticator(app, browser)
    assert browser.execute_script("return location.origin") == origin
    assert ok(run(browser, "return new Passkeyd().server;")) == server.origin

    signed_up = sign_up(browser, "ada")
    assert signed_up["user"]["username"] == "ada" and signed_up["hasAccessToken"]
    # The session cookie passkeyd set rides along with the module's credentialed requests.
    session = ok(run(browser, "const s = await new Passkeyd().session(); return s && s.user.username;"))
    assert session == "ada"
    sign_out(browser)
    assert ok(run(browser, "return await new Passkeyd().session();")) is None

    # Username-first (allowCredentials), then discoverable: both through the modal sheet.
    for username in ("ada", None):
        signed_in = ok(run(browser, "const a = await new Passkeyd().signIn(args[0] ? {username: args[0]} : {});"
                                    "return {username: a.user.username, token: typeof a.accessToken};", username))
        assert signed_in == {"username": "ada", "token": "string"}
        sign_out(browser)
    assert [g["mediation"] for g in browser.execute_script("return window.record.gets")] == ["optional", "optional"]


def test_autofill_signs_in_through_conditional_mediation(app, browser):
    _, origin = open_with_authenticator(app, browser)
    sign_up(browser, "grace")
    sign_out(browser)
    # Chromium's automation picks the virtual authenticator's passkey from AutoFill at once.
    result = ok(run(browser, """
        const input = document.getElementById('username');
        const answer = await new Passkeyd().autoFill(input);
        return {username: answer.user.username, autocomplete: input.getAttribute('autocomplete'),
                gets: window.record.gets.map((g) => g.mediation)};"""))
    assert result == {"username": "grace", "autocomplete": "username webauthn", "gets": ["conditional"]}


def test_a_modal_sign_in_takes_over_from_autofill(app, browser):
    _, origin = open_with_authenticator(app, browser)
    sign_up(browser, "hedy")
    sign_out(browser)
    # The person's device fails verification: the modal sign-in fails, AutoFill comes back.
    passkeys = swap_authenticator(browser, user_verified=False)
    browser.execute_script("window.holdConditional = true")
    first = ok(run(browser, """
        window.client = new Passkeyd();
        window.pending = window.client.autoFill(document.getElementById('username')).then(
            (answer) => ({username: answer.user.username}), (error) => ({code: error.code}));
        await until(() => window.record.gets.length === 1);
        let code = null;
        try { await window.client.signIn({username: 'hedy'}); } catch (error) { code = error.code; }
        await until(() => window.record.gets.length === 3);
        return {code, gets: window.record.gets};"""))
    assert first["code"] == "cancelled"
    assert first["gets"] == [{"mediation": "conditional", "aborted": True},   # stepped aside
                             {"mediation": "optional", "aborted": False},     # the modal sheet
                             {"mediation": "conditional", "aborted": False}]  # back again
    # Now the modal sign-in succeeds: the AutoFill request ends as `cancelled`.
    swap_authenticator(browser, passkeys)
    second = ok(run(browser, """
        const answer = await window.client.signIn({username: 'hedy'});
        return {username: answer.user.username, autofill: await window.pending, gets: window.record.gets.slice(3)};"""))
    assert second["username"] == "hedy" and second["autofill"] == {"code": "cancelled"}
    # The AutoFill request that came back stepped aside for it, and was not asked again.
    assert second["gets"] == [{"mediation": "optional", "aborted": False}]
    assert browser.execute_script("return window.record.gets[2].aborted") is True


def test_passkeys_are_added_listed_renamed_and_deleted(app, browser):
    _, origin = open_with_authenticator(app, browser)
    user = sign_up(browser, "bob")["user"]
    swap_authenticator(browser)  # a second device
    result = ok(run(browser, """
        const client = new Passkeyd();
        const added = await client.addPasskey({name: 'Second device'});
        const listed = await client.passkeys();
        const renamed = await client.renamePasskey(added.passkey.id, 'Work laptop');
        await client.deletePasskey(listed[0].id);
        const after = await client.passkeys();
        let last = null;
        try { await client.deletePasskey(after[0].id); } catch (error) { last = {code: error.code, status: error.status}; }
        const session = await client.session();
        return {added: added.passkey.name, listed: listed.map((p) => p.id), renamed: renamed.name,
                after: after.map((p) => ({id: p.id, name: p.name})), last, userHandle: session.user.userHandle,
                signals: window.record.signals};"""))
    assert result["added"] == "Second device" and result["renamed"] == "Work laptop"
    assert len(result["listed"]) == 2
    assert result["after"] == [{"id": result["listed"][1], "name": "Work laptop"}]
    assert result["last"] == {"code": "last_passkey", "status": 409}
    # The passkey provider is told which passkeys still count, and the account's names.
    accepted = [s["details"] for s in result["signals"] if s["name"] == "signalAllAcceptedCredentials"]
    assert [a["allAcceptedCredentialIds"] for a in accepted] == [result["listed"], [result["listed"][1]], [result["listed"][1]]]
    assert all(a["rpId"] == "localhost" and a["userId"] == user["userHandle"] == result["userHandle"] for a in accepted)
    details = [s["details"] for s in result["signals"] if s["name"] == "signalCurrentUserDetails"]
    assert details and details[-1] == {"rpId": "localhost", "userId": user["userHandle"], "name": "bob", "displayName": "Person bob"}


def test_a_removed_passkey_is_reported_signalled_and_autofill_comes_back(app, browser):
    _, origin = open_with_authenticator(app, browser)
    sign_up(browser, "dave")
    old = swap_authenticator(browser)
    ok(run(browser, "const c = new Passkeyd(); await c.addPasskey(); await c.deletePasskey((await c.passkeys())[0].id);"))
    sign_out(browser)
    swap_authenticator(browser, old)  # back on the first device, which still offers its passkey
    removed = old[0].id.rstrip("=")  # base64url, as the server and the browser write it
    result = ok(run(browser, """
        const input = document.getElementById('username');
        const controller = new AbortController();
        const errors = [];
        const pending = new Passkeyd().autoFill(input, {signal: controller.signal, onError: (e) => errors.push({code: e.code, status: e.status, message: e.message})});
        await until(() => errors.length === 1);
        input.dispatchEvent(new Event('input'));   // the person comes back to the field
        await until(() => errors.length === 2);
        controller.abort();
        const end = await pending.then(() => 'signed in', (error) => error.code);
        let modal = null;
        try { await new Passkeyd().signIn(); } catch (error) { modal = {code: error.code, message: error.message}; }
        return {errors, end, modal, gets: window.record.gets.map((g) => g.mediation),
                unknown: window.record.signals.filter((s) => s.name === 'signalUnknownCredential').map((s) => s.details)};"""))
    assert result["errors"][0]["code"] == "passkey_removed" and result["errors"][0]["status"] == 401
    assert result["errors"][0]["message"] == CATALOGUES["en"]["error.passkey_removed"]
    assert result["end"] == "cancelled"
    assert result["modal"]["code"] == "passkey_removed"
    assert result["gets"] == ["conditional", "conditional", "optional"]
    assert result["unknown"] == [{"rpId": "localhost", "credentialId": removed}] * 3


def test_errors_are_typed_and_in_the_clients_language(app, browser):
    _, origin = open_with_authenticator(app, browser)
    sign_up(browser, "erin")
    sign_out(browser)

    taken = failed(run(browser, "const fr = new Passkeyd({lang: 'fr-CA'}); await fr.ready; await fr.signUp({username: 'erin'});"))
    assert taken["code"] == "username_taken" and taken["status"] == 409 and taken["name"] == "PasskeydError"
    assert taken["message"] == CATALOGUES["fr"]["error.username_taken"]
    english = failed(run(browser, "await new Passkeyd({lang: 'de'}).signUp({username: 'erin'});"))
    assert english["message"] == CATALOGUES["en"]["error.username_taken"]

    # The server cannot be reached: `network`; its catalogue neither, so built-in English.
    closed = f"http://localhost:{free_port()}"
    network = failed(run(browser, "await new Passkeyd({server: args[0], lang: 'fr'}).session();", closed))
    assert network == {"name": "PasskeydError", "code": "network", "status": 0, "retryAfter": None, "typed": True,
                       "message": CATALOGUES["en"]["error.network"]}

    # The person refuses (verification fails): `cancelled`, at once.
    swap_authenticator(browser, user_verified=False)
    cancelled = failed(run(browser, "await new Passkeyd({lang: 'fr'}).signIn({username: 'erin'});"))
    assert cancelled["code"] == "cancelled" and cancelled["message"] == CATALOGUES["fr"]["error.cancelled"]

    # No WebAuthn at all: `unsupported`.
    unsupported = failed(run(browser, """const saved = window.PublicKeyCredential; delete window.PublicKeyCredential;
        try { await new Passkeyd().signIn(); } finally { window.PublicKeyCredential = saved; }"""))
    assert unsupported["code"] == "unsupported"

    # Plurals and placeholders follow the language.
    said = ok(run(browser, """const fr = new Passkeyd({lang: 'fr'}), en = new Passkeyd({lang: 'en'}); await fr.ready; await en.ready;
        return [fr.language, fr.message('status.revoked', {count: 0}), en.message('status.revoked', {count: 1}), en.message('status.revoked', {count: 2})];"""))
    assert said == ["fr", "0 autre session déconnectée.", "Signed out 1 other session.", "Signed out 2 other sessions."]

    # The built-in English is the catalogue's English.
    fallback = ok(run(browser, "return window.passkeyd.FALLBACK_MESSAGES;"))
    assert fallback == {key: CATALOGUES["en"][key] for key in fallback}


def test_a_bearer_client_keeps_the_token_and_no_cookie(app, browser):
    _, origin = open_with_authenticator(app, browser)
    sign_up(browser, "finn")
    sign_out(browser)
    result = ok(run(browser, """
        const client = new Passkeyd({auth: 'bearer'});
        await client.signIn();
        const hasToken = typeof client.sessionToken === 'string' && client.sessionToken.length > 20;
        const session = await client.session();
        const cookieSession = await new Passkeyd().session();   // no cookie was kept
        const passkeys = (await client.passkeys()).length;
        await client.signOut();
        return {hasToken, username: session.user.username, cookieSession, passkeys, after: client.sessionToken};"""))
    assert result == {"hasToken": True, "username": "finn", "cookieSession": None, "passkeys": 1, "after": None}


NO_LEVEL_3_JSON = """
delete PublicKeyCredential.parseCreationOptionsFromJSON;
delete PublicKeyCredential.parseRequestOptionsFromJSON;
delete PublicKeyCredential.prototype.toJSON;
"""


def test_the_fallback_json_encoding_works_without_level_3_helpers(app, browser):
    _, origin = app
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_LEVEL_3_JSON})
    browser.add_virtual_authenticator(authenticator_options())
    open_app(browser, origin)
    assert browser.execute_script("return typeof PublicKeyCredential.parseCreationOptionsFromJSON + typeof PublicKeyCredential.prototype.toJSON") == "undefinedundefined"
    sign_up(browser, "gail")
    sign_out(browser)
    assert ok(run(browser, "return (await new Passkeyd().signIn({username: 'gail'})).user.username;")) == "gail"
    # base64url both ways, against the browser's own base64 for every length up to 64 bytes;
    # standard-alphabet characters are refused, never read as something else.
    checked = ok(run(browser, """
        const { toBase64url, fromBase64url } = window.passkeyd;
        for (let n = 0; n <= 64; n++) {
          const bytes = crypto.getRandomValues(new Uint8Array(n));
          const expected = btoa(String.fromCharCode(...bytes)).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
          if (toBase64url(bytes) !== expected) throw new Error('encode ' + n);
          if (new Uint8Array(fromBase64url(expected)).join() !== bytes.join()) throw new Error('decode ' + n);
        }
        const refused = ['ab+c', 'ab/c', 'a', 'ab c'].filter((text) => { try { fromBase64url(text); return false; } catch { return true; } });
        return refused.length;"""))
    assert checked == 4


def test_a_page_on_an_unlisted_origin_cannot_load_the_client(app, browser):
    server, _ = app
    port = free_port()
    httpd = serve_page(BLOCKED_PAGE % {"module": json.dumps(server.origin + "/passkeyd.js")}, port)
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        status = ok(run_plain(browser, """const end = performance.now() + 10000;
            while (document.getElementById('status').textContent === 'loading' && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
            return document.getElementById('status').textContent;"""))
        assert status == "blocked TypeError", status
    finally:
        httpd.shutdown()


def run_plain(browser, body):
    """`run` for a page without the module."""
    return browser.execute_async_script("""const done = arguments[arguments.length - 1];
        (async () => { %s })().then((value) => done({ok: true, value}), (error) => done({ok: false, error: String(error)}));""" % body)
