"""Apps that trust passkeyd, as a browser and a backend meet them: a single-page app on a second
origin signs up and in against passkeyd with `fetch(…, {credentials: "include"})` (CORS), a page
on an unlisted origin is refused, and the access token it got is verified by PyJWT with nothing
but passkeyd's JWKS document (an independent JOSE implementation)."""
import json
import urllib.request

import jwt
import pytest
from test_web import wait

from conftest import Server, authenticator_options, free_port, serve_page

AUDIENCE = "https://api.shop.example"

APP_PAGE = """<!doctype html><meta charset="utf-8"><title>app</title><pre id="out">working</pre>
<script>
const auth = %(auth)s;
async function call(path, body) {
  const response = await fetch(auth + path, {
    method: body === undefined ? 'GET' : 'POST', credentials: 'include',
    headers: body === undefined ? {} : {'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body)});
  const json = await response.json();
  if (!response.ok) throw new Error(path + ': ' + JSON.stringify(json));
  return json;
}
async function run() {
  const options = await call('/api/auth/register/options', {username: 'spa-user'});
  const created = await navigator.credentials.create({publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options)});
  await call('/api/auth/register/verify', {credential: created.toJSON()});
  const request = await call('/api/auth/authenticate/options', {});
  const assertion = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(request)});
  const signedIn = await call('/api/auth/authenticate/verify', {credential: assertion.toJSON()});
  // The session cookie passkeyd set rides along on the next credentialed requests.
  const session = await call('/api/auth/session');
  const fresh = await call('/api/auth/token', {});
  document.getElementById('out').textContent = JSON.stringify(
    {username: session.user.username, accessToken: signedIn.accessToken, fresh: fresh.accessToken});
}
run().catch(error => { document.getElementById('out').textContent = 'error ' + error; });
</script>"""

BLOCKED_PAGE = """<!doctype html><meta charset="utf-8"><pre id="out">working</pre>
<script>
fetch(%(auth)s + '/api/auth/authenticate/options', {method: 'POST', credentials: 'include',
  headers: {'Content-Type': 'application/json'}, body: '{}'})
  .then(r => r.text()).then(t => { document.getElementById('out').textContent = 'read ' + t; })
  .catch(e => { document.getElementById('out').textContent = 'blocked ' + e.name; });
</script>"""


def out(browser, timeout=30):
    return wait(browser, timeout).until(lambda d: (text := d.find_element("id", "out").text) != "working" and text)


@pytest.fixture(scope="module")
def spa():
    """passkeyd, and a single-page app on another origin of the same site (localhost, another
    port): a web origin of the relying party (its pages run the ceremonies) and a CORS origin."""
    app_port = free_port()
    app_origin = f"http://localhost:{app_port}"
    server = Server(extra_origins=[app_origin], PASSKEYD_CORS_ORIGINS=app_origin, PASSKEYD_TOKEN_AUDIENCES=AUDIENCE)
    yield server, app_port, app_origin
    server.stop()


def test_a_single_page_app_on_another_origin_signs_in_and_its_backend_trusts_the_token(spa, browser):
    server, app_port, app_origin = spa
    httpd = serve_page(APP_PAGE % {"auth": json.dumps(server.origin)}, app_port)
    try:
        browser.add_virtual_authenticator(authenticator_options())
        browser.get(app_origin + "/")
        text = out(browser)
        assert not text.startswith("error"), text
        result = json.loads(text)
        assert result["username"] == "spa-user"
    finally:
        httpd.shutdown()
    # The app's backend: the JWKS document, fetched over HTTP, and PyJWT. Nothing else.
    with urllib.request.urlopen(server.origin + "/.well-known/jwks.json") as response:
        jwks = json.load(response)
    for token in (result["accessToken"], result["fresh"]):
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid)
        claims = jwt.decode(token, key=key.key, algorithms=["ES256"], audience=AUDIENCE, issuer=server.origin,
                            options={"require": ["exp", "iat", "nbf", "sub", "jti"]})
        assert claims["username"] == "spa-user" and claims["amr"] == ["webauthn"]
        assert claims["exp"] - claims["iat"] == 300
        # One byte of the payload changed: PyJWT refuses it too.
        head, payload, signature = token.split(".")
        forged = head + "." + payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + signature
        with pytest.raises(jwt.InvalidTokenError):
            jwt.decode(forged, key=key.key, algorithms=["ES256"], audience=AUDIENCE)
        with pytest.raises(jwt.InvalidAudienceError):
            jwt.decode(token, key=key.key, algorithms=["ES256"], audience="https://someone-else.example")


def test_a_page_on_an_unlisted_origin_cannot_read_answers(spa, browser):
    server, _, _ = spa
    port = free_port()
    httpd = serve_page(BLOCKED_PAGE % {"auth": json.dumps(server.origin)}, port)
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        assert out(browser).startswith("blocked"), "an unlisted origin read passkeyd's answer"
    finally:
        httpd.shutdown()
