"""passkeyd as an OpenID Provider, driven by an OIDC client nobody here wrote (Authlib): discovery,
the authorization code flow with PKCE through a real passkey sign-in in Chromium, the consent
screen, code exchange, ID token validation against the JWKS, userinfo, refresh with rotation
and reuse detection, revocation, and RP-initiated logout. Then the ways it must refuse."""
import base64
import hashlib
import json
import secrets
import urllib.parse
import warnings

import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session

warnings.filterwarnings("ignore", message="authlib.jose module is deprecated")
from authlib.jose import JsonWebKey, jwt  # noqa: E402
from authlib.oidc.core import CodeIDToken
from selenium.webdriver.common.by import By

from conftest import Server, authenticator_options, free_port, serve_page
from test_web import sign_up, visible, wait


class App:
    """The relying app's callback and post-logout pages on loopback."""

    def __init__(self):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"

        self.httpd = serve_page("<!doctype html><title>app</title><p id='app'>back in the app</p>", self.port)

    def stop(self):
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def provider():
    server = Server()
    app = App()
    added = server.passkeyd("admin", "clients", "add", "Shop", "--redirect-uri", app.base + "/callback",
                            "--post-logout-uri", app.base + "/bye", "--allow-sign-up")
    assert added.returncode == 0, added.stderr
    values = dict(line.split("=", 1) for line in added.stdout.split())
    public = server.passkeyd("admin", "clients", "add", "Mobile", "--public", "--redirect-uri", "com.example.shop:/callback")
    assert public.returncode == 0, public.stderr
    public_id = dict(line.split("=", 1) for line in public.stdout.split())["client_id"]
    discovery = requests.get(server.origin + "/.well-known/openid-configuration").json()
    yield server, app, values["client_id"], values["client_secret"], public_id, discovery
    app.stop()
    server.stop()


def wait_for(browser, predicate, timeout=30):
    return wait(browser, timeout).until(lambda d: predicate(d))


def test_discovery_says_what_the_server_does(provider):
    server, _, _, _, _, discovery = provider
    assert discovery["issuer"] == server.origin
    for key, path in [("authorization_endpoint", "/oauth2/authorize"), ("token_endpoint", "/oauth2/token"),
                      ("userinfo_endpoint", "/oauth2/userinfo"), ("jwks_uri", "/.well-known/jwks.json"),
                      ("revocation_endpoint", "/oauth2/revoke"), ("end_session_endpoint", "/oauth2/logout"),
                      ("introspection_endpoint", "/oauth2/introspect")]:
        assert discovery[key] == server.origin + path
    assert discovery["response_types_supported"] == ["code"]
    assert discovery["code_challenge_methods_supported"] == ["S256"]
    assert set(discovery["id_token_signing_alg_values_supported"]) == {"RS256", "ES256"}
    assert discovery["authorization_response_iss_parameter_supported"] is True
    assert set(discovery["token_endpoint_auth_methods_supported"]) == {"client_secret_basic", "client_secret_post", "none"}
    # Every endpoint it names is served.
    for key, method in [("authorization_endpoint", "GET"), ("token_endpoint", "POST"), ("userinfo_endpoint", "GET"),
                        ("jwks_uri", "GET"), ("revocation_endpoint", "POST"), ("end_session_endpoint", "GET"),
                        ("introspection_endpoint", "POST")]:
        answer = requests.request(method, discovery[key], allow_redirects=False)
        assert answer.status_code not in (404, 405), f"{key}: {answer.status_code}"


def test_the_whole_flow_with_authlib_and_a_passkey(provider, browser):
    server, app, client_id, client_secret, _, discovery = provider
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "olive")

    client = OAuth2Session(client_id, client_secret, scope="openid profile offline_access",
                           redirect_uri=app.base + "/callback", code_challenge_method="S256")
    verifier = secrets.token_urlsafe(48)
    nonce = secrets.token_urlsafe(16)
    url, state = client.create_authorization_url(discovery["authorization_endpoint"], code_verifier=verifier, nonce=nonce)

    # Signed in already: the consent screen, then back to the app with a code.
    browser.get(url)
    visible(browser, "view-consent")
    assert "Shop" in browser.find_element(By.ID, "consent-client").text
    assert "Stay signed in" in browser.find_element(By.ID, "consent-scopes").text
    browser.find_element(By.ID, "consent-allow").click()
    wait_for(browser, lambda d: d.current_url.startswith(app.base + "/callback"))
    callback = browser.current_url
    query = urllib.parse.parse_qs(urllib.parse.urlparse(callback).query)
    assert query["state"] == [state] and query["iss"] == [server.origin]

    token = client.fetch_token(discovery["token_endpoint"], authorization_response=callback, code_verifier=verifier)
    assert token["token_type"] == "Bearer" and token["expires_in"] == 300
    assert token["refresh_token"].startswith("rt_") and "openid" in token["scope"]

    # The ID token, checked by Authlib against the JWKS alone.
    jwks = JsonWebKey.import_key_set(requests.get(discovery["jwks_uri"]).json())
    claims = jwt.decode(token["id_token"], jwks, claims_cls=CodeIDToken,
                        claims_options={"iss": {"essential": True, "value": server.origin}},
                        claims_params={"nonce": nonce, "client_id": client_id})
    claims.validate()
    assert claims.header["alg"] == "RS256"
    assert claims["aud"] == [client_id] or claims["aud"] == client_id
    assert claims["amr"] == ["webauthn"] and claims["acr"] == "phr" and claims["preferred_username"] == "olive"
    assert claims["sid"] and claims["auth_time"] <= claims["iat"]

    info = client.get(discovery["userinfo_endpoint"]).json()
    assert info["sub"] == claims["sub"] and info["preferred_username"] == "olive"

    # Refresh rotates; the old refresh token used again ends the whole grant.
    first_refresh = token["refresh_token"]
    refreshed = client.refresh_token(discovery["token_endpoint"], refresh_token=first_refresh)
    assert refreshed["refresh_token"] != first_refresh
    reuse = requests.post(discovery["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": first_refresh},
                          auth=(client_id, client_secret))
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    after_reuse = requests.post(discovery["token_endpoint"],
                                data={"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"]},
                                auth=(client_id, client_secret))
    assert after_reuse.json()["error"] == "invalid_grant", "the newest token of a reused family still worked"

    # A fresh grant (consent is on record now: straight back), then revoked (RFC 7009).
    verifier = secrets.token_urlsafe(48)
    url, state = client.create_authorization_url(discovery["authorization_endpoint"], code_verifier=verifier, nonce="n2")
    browser.get(url)
    wait_for(browser, lambda d: d.current_url.startswith(app.base + "/callback"))
    second = client.fetch_token(discovery["token_endpoint"], authorization_response=browser.current_url, code_verifier=verifier)
    assert client.revoke_token(discovery["revocation_endpoint"], token=second["refresh_token"]).status_code == 200
    revoked = requests.post(discovery["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": second["refresh_token"]},
                            auth=(client_id, client_secret))
    assert revoked.json()["error"] == "invalid_grant"

    # RP-initiated logout: back to the registered page with the state, and signed out.
    logout = discovery["end_session_endpoint"] + "?" + urllib.parse.urlencode(
        {"id_token_hint": second["id_token"], "post_logout_redirect_uri": app.base + "/bye", "state": "s1"})
    browser.get(logout)
    wait_for(browser, lambda d: d.current_url.startswith(app.base + "/bye"))
    assert "state=s1" in browser.current_url
    # Signed out of passkeyd. (Asked through the API: the sign-in page would sign the virtual
    # authenticator's passkey straight back in through AutoFill.)
    browser.get(server.origin + "/api/auth/session")
    assert "not_signed_in" in browser.find_element(By.TAG_NAME, "body").text


def test_signing_in_through_the_app_first(provider, browser):
    """Not signed in: the app sends the person to passkeyd's sign-in page (a passkey), then back."""
    server, app, client_id, client_secret, _, discovery = provider
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "petra")
    browser.delete_all_cookies()
    client = OAuth2Session(client_id, client_secret, scope="openid", redirect_uri=app.base + "/callback",
                           code_challenge_method="S256")
    verifier = secrets.token_urlsafe(48)
    url, _ = client.create_authorization_url(discovery["authorization_endpoint"], code_verifier=verifier, nonce="n")
    browser.get(url)
    # The sign-in page says why, and signs in with the passkey: AutoFill (the virtual
    # authenticator answers the conditional request at once) or the button.
    wait_for(browser, lambda d: "continue to Shop" in d.find_element(By.ID, "message").text)
    try:
        visible(browser, "view-consent")
    except Exception:
        browser.find_element(By.ID, "signin-button").click()
        visible(browser, "view-consent")
    browser.find_element(By.ID, "consent-allow").click()
    wait_for(browser, lambda d: d.current_url.startswith(app.base + "/callback"))
    token = client.fetch_token(discovery["token_endpoint"], authorization_response=browser.current_url, code_verifier=verifier)
    assert "refresh_token" not in token  # no offline_access asked


def post_form(browser, app, action, fields):
    """From the app's page (127.0.0.1: another site than passkeyd's localhost), a form POST."""
    browser.get(app.base + "/")
    browser.execute_script("""
        const form = document.createElement("form");
        form.method = "post";
        form.action = arguments[0];
        for (const [name, value] of Object.entries(arguments[1])) {
            const input = document.createElement("input");
            input.type = "hidden"; input.name = name; input.value = value;
            form.appendChild(input);
        }
        document.body.appendChild(form);
        form.submit();""", action, fields)


def test_an_app_on_another_site_posts_its_requests_as_forms(provider, browser):
    """OpenID Connect Core 3.1.2.1 and RP-Initiated Logout 2: the authorization and logout
    endpoints take POST too. A form posted from the app's page (another site) reaches the
    signed-in session: a code comes back, and the logout ends that session."""
    server, app, client_id, client_secret, _, discovery = provider
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "posy")
    verifier, challenge = pkce()
    post_form(browser, app, discovery["authorization_endpoint"], {
        "client_id": client_id, "redirect_uri": app.base + "/callback", "response_type": "code", "scope": "openid",
        "state": "form state", "nonce": "n", "code_challenge": challenge, "code_challenge_method": "S256"})
    callback = app.base + "/callback"
    wait_for(browser, lambda d: d.current_url.startswith(callback) or d.find_element(By.ID, "view-consent").is_displayed())
    if not browser.current_url.startswith(callback):
        browser.find_element(By.ID, "consent-allow").click()
    wait_for(browser, lambda d: d.current_url.startswith(callback))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    assert query["state"] == ["form state"] and query["iss"] == [server.origin]
    token = requests.post(discovery["token_endpoint"], data={
        "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": callback, "code_verifier": verifier},
        auth=(client_id, client_secret)).json()
    assert "id_token" in token, token

    post_form(browser, app, discovery["end_session_endpoint"], {
        "id_token_hint": token["id_token"], "post_logout_redirect_uri": app.base + "/bye", "state": "bye state"})
    wait_for(browser, lambda d: d.current_url.startswith(app.base + "/bye"))
    assert "state=bye+state" in browser.current_url or "state=bye%20state" in browser.current_url
    browser.get(server.origin + "/api/auth/session")
    assert "not_signed_in" in browser.find_element(By.TAG_NAME, "body").text


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def code_for(browser, server, app, client_id, challenge, scope="openid"):
    url = server.origin + "/oauth2/authorize?" + urllib.parse.urlencode({
        "client_id": client_id, "redirect_uri": app.base + "/callback", "response_type": "code", "scope": scope,
        "state": "st", "code_challenge": challenge, "code_challenge_method": "S256"})
    browser.get(url)
    callback = app.base + "/callback"
    wait_for(browser, lambda d: d.current_url.startswith(callback) or d.find_element(By.ID, "view-consent").is_displayed())
    if not browser.current_url.startswith(callback):
        browser.find_element(By.ID, "consent-allow").click()
    wait_for(browser, lambda d: d.current_url.startswith(callback))
    return urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)["code"][0]


def test_what_the_provider_refuses(provider, browser):
    server, app, client_id, client_secret, public_id, discovery = provider
    browser.add_virtual_authenticator(authenticator_options())
    sign_up(browser, server, "quinn")
    token_url = discovery["token_endpoint"]

    # A redirect URI that is not registered: an error page, never a redirect.
    wrong = requests.get(server.origin + "/oauth2/authorize", allow_redirects=False, params={
        "client_id": client_id, "redirect_uri": app.base + "/elsewhere", "response_type": "code", "scope": "openid"})
    assert wrong.status_code == 400 and "location" not in wrong.headers

    # A public client must use PKCE: the error goes back on the (valid) redirect.
    no_pkce = requests.get(server.origin + "/oauth2/authorize", allow_redirects=False, params={
        "client_id": public_id, "redirect_uri": "com.example.shop:/callback", "response_type": "code", "scope": "openid", "state": "x"})
    assert no_pkce.status_code == 302
    assert "error=invalid_request" in no_pkce.headers["location"] and "state=x" in no_pkce.headers["location"]
    plain = requests.get(server.origin + "/oauth2/authorize", allow_redirects=False, params={
        "client_id": public_id, "redirect_uri": "com.example.shop:/callback", "response_type": "code", "scope": "openid",
        "code_challenge": "a" * 43, "code_challenge_method": "plain"})
    assert "error=invalid_request" in plain.headers["location"]

    # Wrong client secret.
    verifier, challenge = pkce()
    code = code_for(browser, server, app, client_id, challenge)
    bad_secret = requests.post(token_url, data={"grant_type": "authorization_code", "code": code, "redirect_uri": app.base + "/callback",
                                                "code_verifier": verifier}, auth=(client_id, "pcs_wrong"))
    assert bad_secret.status_code == 401 and bad_secret.json()["error"] == "invalid_client"
    # Wrong verifier.
    wrong_verifier = requests.post(token_url, data={"grant_type": "authorization_code", "code": code, "redirect_uri": app.base + "/callback",
                                                    "code_verifier": pkce()[0]}, auth=(client_id, client_secret))
    assert wrong_verifier.json()["error"] == "invalid_grant"

    # A code used twice: the second use fails and revokes what the first issued.
    verifier, challenge = pkce()
    code = code_for(browser, server, app, client_id, challenge, scope="openid offline_access")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": app.base + "/callback", "code_verifier": verifier}
    first = requests.post(token_url, data=form, auth=(client_id, client_secret)).json()
    assert "access_token" in first
    again = requests.post(token_url, data=dict(form, client_id=client_id, client_secret=client_secret))  # client_secret_post
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    refresh = requests.post(token_url, data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
                            auth=(client_id, client_secret))
    assert refresh.json()["error"] == "invalid_grant", "the first exchange's refresh token survived a code reuse"
    first_info = requests.get(discovery["userinfo_endpoint"], headers={"Authorization": "Bearer " + first["access_token"]})
    assert first_info.status_code == 401, "the first exchange's access token survived a code reuse"

    # alg: none at the userinfo endpoint, against a token that is otherwise valid.
    verifier, challenge = pkce()
    code = code_for(browser, server, app, client_id, challenge)
    fresh = requests.post(token_url, data={"grant_type": "authorization_code", "code": code, "redirect_uri": app.base + "/callback",
                                           "code_verifier": verifier}, auth=(client_id, client_secret)).json()
    head = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "at+jwt"}).encode()).rstrip(b"=").decode()
    body = fresh["access_token"].split(".")[1]
    forged = requests.get(discovery["userinfo_endpoint"], headers={"Authorization": f"Bearer {head}.{body}."})
    assert forged.status_code == 401
    assert requests.get(discovery["userinfo_endpoint"], headers={"Authorization": "Bearer " + fresh["access_token"]}).status_code == 200

    # Another client cannot spend this client's code: a public client posting it is refused,
    # and the owner's own exchange still works (RFC 6749 §4.1.3).
    verifier, challenge = pkce()
    code = code_for(browser, server, app, client_id, challenge)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": app.base + "/callback", "code_verifier": verifier}
    stolen = requests.post(token_url, data=dict(form, client_id=public_id))
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    assert "access_token" in requests.post(token_url, data=form, auth=(client_id, client_secret)).json()
    assert requests.post(token_url, data={"grant_type": "password"}, auth=(client_id, client_secret)).json()["error"] == "unsupported_grant_type"
