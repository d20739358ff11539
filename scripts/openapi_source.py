#!/usr/bin/env python3
"""Source of docs/openapi.json (run: python3 scripts/openapi_source.py > docs/openapi.json; then scripts/gen-openapi)."""
import json

ERROR_CODES = {
    "malformed_json": "The body is not the documented JSON (the message names the field).",
    "malformed_client_data": "clientDataJSON is not valid client data.",
    "malformed_authenticator_data": "authenticatorData is malformed.",
    "malformed_attestation_object": "attestationObject is malformed.",
    "malformed_public_key": "The credential public key is malformed.",
    "malformed_credential": "credential.type is not public-key.",
    "body_too_large": "The body exceeds the configured limit (413).",
    "invalid_username": "The username is empty, over 64 characters or 256 bytes, uses other characters than letters, digits and . _ - @ +, compatibility characters, or mixes scripts (PRECIS UsernameCaseMapped, see docs/security.md).",
    "invalid_display_name": "The display name is too long or has control characters.",
    "invalid_name": "A passkey name must have 1 to 64 characters.",
    "username_taken": "Sign-up for a username that exists (409).",
    "challenge_unknown": "The response answers no open ceremony (never issued, or already used).",
    "challenge_expired": "The ceremony's challenge expired.",
    "ceremony_mismatch": "The challenge was issued for the other ceremony (registration vs authentication) or API.",
    "account_mismatch": "The challenge was issued to another account.",
    "type_mismatch": "clientData.type is wrong for the ceremony.",
    "challenge_mismatch": "clientData.challenge is not the ceremony's challenge.",
    "origin_not_allowed": "clientData.origin is not a configured web or Android origin.",
    "cross_origin_not_allowed": "The ceremony ran in a cross-origin iframe.",
    "top_origin_not_allowed": "clientData.topOrigin is not allowed.",
    "rp_id_hash_mismatch": "The passkey belongs to another RP ID.",
    "user_not_present": "UP flag missing.",
    "user_not_verified": "UV flag missing while user verification is required.",
    "invalid_backup_flags": "BS set without BE.",
    "backup_eligibility_changed": "BE differs from registration.",
    "unsupported_algorithm": "The credential algorithm is not accepted.",
    "credential_id_mismatch": "credential.id/rawId disagree with each other or with the attested credential.",
    "credential_id_too_long": "The credential ID exceeds 1023 bytes.",
    "unsupported_attestation_format": "Unknown attestation statement format.",
    "attestation_invalid": "The attestation statement does not verify.",
    "attestation_untrusted": "The attestation does not chain to a configured trust anchor.",
    "attestation_not_allowed": "The attestation format is not allowed by policy.",
    "credential_already_registered": "This passkey is registered already (409).",
    "credential_not_found": "Sign-in with a passkey the server does not know (deleted?) (401). Browsers should call PublicKeyCredential.signalUnknownCredential.",
    "credential_not_allowed": "The passkey does not belong to the account the sign-in was started for (401).",
    "user_handle_mismatch": "userHandle missing or not the passkey owner's (401).",
    "signature_invalid": "The assertion signature does not verify (401).",
    "counter_regression": "The signature counter did not increase: possible cloned authenticator (401).",
    "counter_conflict": "Two sign-ins with the same passkey raced; one lost (409).",
    "account_disabled": "The account is disabled (403).",
    "not_signed_in": "No live session: missing, expired, revoked or unknown token (401).",
    "csrf_origin_mismatch": "A cookie-authenticated state-changing request without an allowed Origin header (403).",
    "passkey_not_found": "No such passkey on this account (404).",
    "last_passkey": "Deleting the account's only passkey is refused (409).",
    "too_many_ceremonies": "Too many open ceremonies; retry after Retry-After (503).",
    "database_unavailable": "The database is unreachable (503).",
    "invalid_mediation": "mediation is not conditional, optional, required or silent (400).",
    "invalid_credentials": "Password sign-in: wrong username or password; unknown usernames get the same answer (401).",
    "invalid_password": "Password sign-in without a password, or one over 1024 bytes; a new password under 8 characters or equal to the username (400).",
    "no_password": "The account has no password to turn off (409).",
    "no_passkey": "The password can be turned off only once the account has a passkey (409).",
    "invalid_recovery_code": "Recovery sign-in: the code is wrong or was used; unknown usernames get the same answer (401).",
    "invalid_recovery_link": "The recovery link is unknown, expired or used (401).",
    "rate_limited": "Too many requests from this address, or too many wrong passwords or recovery codes for this account from this address; retry after Retry-After seconds (429).",
    "not_found": "No such endpoint, or a path not in its one canonical spelling (no empty or dot segments, no trailing slash, no encoded slash, dot or control byte) (404).",
    "unsupported_media_type": "A request body that is not sent as Content-Type: application/json, or a session-issuing request without one (415).",
    "cross_site_request": "A browser request marked Sec-Fetch-Site: cross-site to a route that issues a session, from an origin that is not allowed (403).",
    "reauthentication_required": "Adding a passkey, removing the last-but-one way in, new recovery codes and a password change need a sign-in within reauthenticationSeconds (403); sign in again (a passkey prompt) and retry.",
    "session_not_found": "No such session on this account (404).",
    "busy": "Password checks are queued past their bound; retry after Retry-After (503).",
    "bad_request": "The request is not valid HTTP (400).",
    "request_refused": "The HTTP layer refused the request (the status says why).",
    "method_not_allowed": "Method not allowed (405).",
    "internal_error": "Unexpected server error (500).",
    "unknown_user": "Compatibility API only: GET /authenticate for a username that does not exist (400), as the reference server answered.",
    "invalid_user_id": "Compatibility API only: userId is not the UUID /signup returned (400).",
}

def ref(name): return {"$ref": f"#/components/schemas/{name}"}
def error_responses(*statuses):
    return {str(s): {"$ref": f"#/components/responses/Error"} for s in statuses}
def json_body(schema, required=True):
    return {"required": required, "content": {"application/json": {"schema": schema}}}
def ok(schema, desc="OK", headers=None):
    r = {"description": desc, "content": {"application/json": {"schema": schema}}}
    if headers: r["headers"] = headers
    return r

SET_COOKIE = {"Set-Cookie": {"description": "The session cookie (HttpOnly, SameSite, Secure outside http://localhost).", "schema": {"type": "string"}}}
B64 = {"type": "string", "description": "base64url (unpadded) on output; base64url or standard base64, padded or not, on input", "contentEncoding": "base64url"}

schemas = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string", "enum": sorted(ERROR_CODES)}, "message": {"type": "string"}}}}},
    "User": {"type": "object", "required": ["id", "username", "displayName", "userHandle"], "properties": {
        "id": {"type": "string", "format": "uuid"}, "username": {"type": "string"}, "displayName": {"type": "string"},
        "userHandle": {**B64, "description": "the WebAuthn user handle (user.id in the options), for PublicKeyCredential signal methods"}}},
    "Passkey": {"type": "object", "required": ["id", "name", "aaguid", "createdAt", "backedUp", "backupEligible", "deviceBound", "transports", "attestationFormat", "userVerified"], "properties": {
        "id": {**B64, "description": "credential ID, base64url"}, "name": {"type": "string"},
        "provider": {"type": ["string", "null"], "description": "passkey provider name from the AAGUID, when known"},
        "aaguid": {"type": "string", "format": "uuid"}, "createdAt": {"type": "string", "format": "date-time"},
        "lastUsedAt": {"type": ["string", "null"], "format": "date-time"},
        "backedUp": {"type": "boolean", "description": "synced by its provider (BS)"},
        "backupEligible": {"type": "boolean", "description": "a multi-device passkey (BE)"},
        "deviceBound": {"type": "boolean", "description": "bound to one device (not BE)"},
        "transports": {"type": "array", "items": {"type": "string"}}, "attestationFormat": {"type": "string"}, "userVerified": {"type": "boolean"}}},
    "CredentialDescriptor": {"type": "object", "required": ["type", "id"], "properties": {
        "type": {"const": "public-key"}, "id": B64, "transports": {"type": "array", "items": {"type": "string"}}}},
    "PublicKeyCredentialCreationOptionsJSON": {"type": "object", "description": "W3C WebAuthn Level 3 PublicKeyCredentialCreationOptionsJSON: pass to PublicKeyCredential.parseCreationOptionsFromJSON, or as the requestJson of Android's CreatePublicKeyCredentialRequest.",
        "required": ["rp", "user", "challenge", "pubKeyCredParams"], "properties": {
        "rp": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
        "user": {"type": "object", "properties": {"id": B64, "name": {"type": "string"}, "displayName": {"type": "string"}}},
        "challenge": B64, "pubKeyCredParams": {"type": "array", "items": {"type": "object", "properties": {"type": {"const": "public-key"}, "alg": {"type": "integer"}}}},
        "timeout": {"type": "integer"}, "excludeCredentials": {"type": "array", "items": ref("CredentialDescriptor")},
        "authenticatorSelection": {"type": "object"}, "hints": {"type": "array", "items": {"type": "string"}},
        "attestation": {"type": "string"}, "extensions": {"type": "object"}}},
    "PublicKeyCredentialRequestOptionsJSON": {"type": "object", "description": "W3C WebAuthn Level 3 PublicKeyCredentialRequestOptionsJSON.",
        "required": ["challenge", "rpId", "allowCredentials", "userVerification"], "properties": {
        "challenge": B64, "timeout": {"type": "integer"}, "rpId": {"type": "string"},
        "allowCredentials": {"type": "array", "items": ref("CredentialDescriptor")}, "userVerification": {"type": "string"},
        "hints": {"type": "array", "items": {"type": "string"}}}},
    "RegistrationResponseJSON": {"type": "object", "description": "PublicKeyCredential.toJSON() of a created credential (W3C Level 3).",
        "required": ["id", "rawId", "type", "response"], "properties": {
        "id": {"type": "string"}, "rawId": B64, "type": {"const": "public-key"},
        "response": {"type": "object", "required": ["clientDataJSON", "attestationObject"], "properties": {
            "clientDataJSON": B64, "attestationObject": B64, "authenticatorData": B64, "transports": {"type": "array", "items": {"type": "string"}},
            "publicKey": B64, "publicKeyAlgorithm": {"type": "integer"}}},
        "authenticatorAttachment": {"type": ["string", "null"]}, "clientExtensionResults": {"type": "object"}}},
    "AuthenticationResponseJSON": {"type": "object", "description": "PublicKeyCredential.toJSON() of an assertion (W3C Level 3).",
        "required": ["id", "rawId", "type", "response"], "properties": {
        "id": {"type": "string"}, "rawId": B64, "type": {"const": "public-key"},
        "response": {"type": "object", "required": ["clientDataJSON", "authenticatorData", "signature"], "properties": {
            "clientDataJSON": B64, "authenticatorData": B64, "signature": B64, "userHandle": {**B64, "type": ["string", "null"]}}},
        "authenticatorAttachment": {"type": ["string", "null"]}, "clientExtensionResults": {"type": "object"}}},
}

OTHER = {"type": "object", "required": ["verified", "user", "token", "expiresAt", "method", "canCreatePasskey", "recovery"], "properties": {"verified": {"const": True}, "user": ref("User"), "token": {"type": "string"}, "expiresAt": {"type": "string", "format": "date-time"}, "method": {"enum": ["password", "recovery_code", "recovery_link"]}, "canCreatePasskey": {"type": "boolean", "description": "the account has no passkey: offer one (or create it with conditional create)"}, "recovery": {"type": "boolean", "description": "signed in by recovery: every other session was revoked; register a new passkey next"}}}

paths = {
    "/api/auth/register/options": {"post": {
        "summary": "Creation options: sign up a new account, or (signed in) add a passkey to the current account",
        "operationId": "registerOptions",
        "requestBody": json_body({"type": "object", "properties": {"username": {"type": "string", "maxLength": 64}, "displayName": {"type": "string", "maxLength": 64}, "mediation": {"enum": ["conditional", "optional", "required", "silent"], "description": "conditional (signed in only): options for automatic passkey creation; the registration may then come without UP and UV (WebAuthn L3 §7.1 step 14)"}}}, required=False),
        "responses": {"200": ok(ref("PublicKeyCredentialCreationOptionsJSON")), **error_responses(400, 403, 409, 413, 429, 503)}}},
    "/api/auth/register/verify": {"post": {
        "summary": "Verify a registration, store the passkey; a sign-up also starts a session",
        "operationId": "registerVerify",
        "requestBody": json_body({"type": "object", "required": ["credential"], "properties": {"credential": ref("RegistrationResponseJSON"), "name": {"type": "string", "maxLength": 64}, "replaces": {"type": "string", "description": "signed in: the ID (base64url) of one of the account's passkeys the new one replaces; removed once the new one is stored"}}}),
        "responses": {"200": ok({"type": "object", "required": ["verified", "user", "passkey"], "properties": {"verified": {"const": True}, "user": ref("User"), "passkey": ref("Passkey"), "token": {"type": ["string", "null"], "description": "session token (sign-up only); send as Authorization: Bearer"}}}, headers=SET_COOKIE),
                      **error_responses(400, 403, 409, 413, 429, 503)}}},
    "/api/auth/authenticate/options": {
        "post": {"summary": "Request options; without a username, for a discoverable (usernameless / AutoFill) sign-in", "operationId": "authenticateOptions",
                 "requestBody": json_body({"type": "object", "properties": {"username": {"type": "string"}}}, required=False),
                 "responses": {"200": ok(ref("PublicKeyCredentialRequestOptionsJSON")), **error_responses(400, 413, 429, 503)}},
        "get": {"summary": "Request options (GET form)", "operationId": "authenticateOptionsGet",
                "parameters": [{"name": "username", "in": "query", "required": False, "schema": {"type": "string"}}],
                "responses": {"200": ok(ref("PublicKeyCredentialRequestOptionsJSON")), **error_responses(400, 429, 503)}}},
    "/api/auth/authenticate/verify": {"post": {
        "summary": "Verify an assertion and start a session", "operationId": "authenticateVerify",
        "requestBody": json_body({"type": "object", "required": ["credential"], "properties": {"credential": ref("AuthenticationResponseJSON")}}),
        "responses": {"200": ok({"type": "object", "required": ["verified", "user", "token", "expiresAt"], "properties": {"verified": {"const": True}, "user": ref("User"), "token": {"type": "string"}, "expiresAt": {"type": "string", "format": "date-time"}}}, headers=SET_COOKIE),
                      **error_responses(400, 401, 403, 409, 413, 429, 503)}}},
    "/api/auth/session": {
        "get": {"summary": "Who am I", "operationId": "getSession", "security": [{"bearer": []}, {"cookie": []}],
                "responses": {"200": ok({"type": "object", "required": ["user", "rpId", "createdAt", "expiresAt"], "properties": {"user": ref("User"), "rpId": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"}, "expiresAt": {"type": "string", "format": "date-time"}, "hasPassword": {"type": "boolean"}, "recoveryCodesLeft": {"type": "integer"}}}), **error_responses(401, 503)}},
        "delete": {"summary": "Sign out (revokes the session)", "operationId": "deleteSession", "security": [{"bearer": []}, {"cookie": []}],
                   "responses": {"204": {"description": "Signed out", "headers": SET_COOKIE}, **error_responses(401, 403, 503)}}},
    "/api/auth/passkeys": {"get": {"summary": "The account's passkeys", "operationId": "listPasskeys", "security": [{"bearer": []}, {"cookie": []}],
        "responses": {"200": ok({"type": "object", "required": ["passkeys"], "properties": {"passkeys": {"type": "array", "items": ref("Passkey")}}}), **error_responses(401, 503)}}},
    "/api/auth/passkeys/{id}": {
        "parameters": [{"name": "id", "in": "path", "required": True, "description": "credential ID, base64url", "schema": {"type": "string"}}],
        "patch": {"summary": "Rename a passkey", "operationId": "renamePasskey", "security": [{"bearer": []}, {"cookie": []}],
                  "requestBody": json_body({"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64}}}),
                  "responses": {"200": ok(ref("Passkey")), **error_responses(400, 401, 403, 404, 503)}},
        "delete": {"summary": "Delete a passkey (never the last one)", "operationId": "deletePasskey", "security": [{"bearer": []}, {"cookie": []}],
                   "responses": {"204": {"description": "Deleted"}, **error_responses(401, 403, 404, 409, 503)}}},
    "/api/auth/password/sign-in": {"post": {
        "summary": "Sign in with a password (accounts imported with bcrypt hashes, on their way to passkeys)", "operationId": "passwordSignIn",
        "requestBody": json_body({"type": "object", "required": ["username", "password"], "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}),
        "responses": {"200": ok(OTHER, headers=SET_COOKIE), **error_responses(400, 401, 403, 413, 429, 503)}}},
    "/api/auth/password": {
        "delete": {"summary": "Turn the account's password off (it needs a passkey first; a recent sign-in when one passkey remains)", "operationId": "removePassword",
            "security": [{"bearer": []}, {"cookie": []}], "responses": {"204": {"description": "Password off"}, **error_responses(401, 403, 409, 503)}},
        "post": {"summary": "Change the password (needs a recent sign-in; every other session ends)", "operationId": "changePassword",
            "security": [{"bearer": []}, {"cookie": []}],
            "requestBody": json_body({"type": "object", "required": ["newPassword"], "properties": {"newPassword": {"type": "string", "minLength": 8}}}),
            "responses": {"204": {"description": "Changed"}, **error_responses(400, 401, 403, 409, 415, 503)}}},
    "/api/auth/sessions": {"get": {"summary": "The account's live sessions, newest first", "operationId": "listSessions",
        "security": [{"bearer": []}, {"cookie": []}],
        "responses": {"200": ok({"type": "object", "required": ["sessions"], "properties": {"sessions": {"type": "array", "items": {"type": "object",
            "required": ["id", "createdAt", "expiresAt", "method", "current"], "properties": {
                "id": {"type": "string", "description": "base64url of the token's SHA-256 (never the token)"},
                "createdAt": {"type": "string", "format": "date-time"}, "expiresAt": {"type": "string", "format": "date-time"},
                "userAgent": {"type": "string"}, "ipAddress": {"type": "string"},
                "method": {"type": "string", "enum": ["passkey", "sign_up", "password", "recovery_code", "recovery_link", "unknown"]},
                "passkeyId": {"type": "string", "description": "the passkey that made it; deleting that passkey ends the session"},
                "current": {"type": "boolean"}}}}}}), **error_responses(401, 503)}}},
    "/api/auth/sessions/revoke-others": {"post": {"summary": "Sign out everywhere else: every session of the account but this one", "operationId": "revokeOtherSessions",
        "security": [{"bearer": []}, {"cookie": []}],
        "responses": {"200": ok({"type": "object", "required": ["revoked"], "properties": {"revoked": {"type": "integer"}}}), **error_responses(401, 403, 503)}}},
    "/api/auth/sessions/{id}": {
        "parameters": [{"name": "id", "in": "path", "required": True, "description": "a session id from GET /api/auth/sessions", "schema": {"type": "string"}}],
        "delete": {"summary": "End one of the account's sessions", "operationId": "revokeSession", "security": [{"bearer": []}, {"cookie": []}],
                   "responses": {"204": {"description": "Ended"}, **error_responses(401, 403, 404, 503)}}},
    "/api/auth/recovery-codes": {"post": {"summary": "Ten new single-use recovery codes (the old ones stop working); shown once",
        "operationId": "createRecoveryCodes", "security": [{"bearer": []}, {"cookie": []}],
        "responses": {"200": ok({"type": "object", "required": ["codes"], "properties": {"codes": {"type": "array", "items": {"type": "string"}, "minItems": 10, "maxItems": 10}}}), **error_responses(401, 403, 503)}}},
    "/api/auth/recovery/sign-in": {"post": {"summary": "Sign in with a recovery code (single use; ends every other session)", "operationId": "recoverySignIn",
        "requestBody": json_body({"type": "object", "required": ["username", "code"], "properties": {"username": {"type": "string"}, "code": {"type": "string"}}}),
        "responses": {"200": ok(OTHER, headers=SET_COOKIE), **error_responses(400, 401, 403, 413, 429, 503)}}},
    "/api/auth/recovery/link": {"post": {"summary": "Sign in with the token of an admin-issued recovery link (`passkeyd admin recovery-link`); single use, expiring",
        "operationId": "recoveryLinkSignIn",
        "requestBody": json_body({"type": "object", "required": ["token"], "properties": {"token": {"type": "string"}}}),
        "responses": {"200": ok(OTHER, headers=SET_COOKIE), **error_responses(400, 401, 403, 413, 429, 503)}}},
    "/.well-known/apple-app-site-association": {"get": {"summary": "Associated domains for iOS apps (webcredentials)", "operationId": "appleAppSiteAssociation",
        "responses": {"200": ok({"type": "object", "properties": {"webcredentials": {"type": "object", "properties": {"apps": {"type": "array", "items": {"type": "string"}}}}}})}}},
    "/.well-known/assetlinks.json": {"get": {"summary": "Digital Asset Links for Android apps", "operationId": "assetLinks",
        "responses": {"200": ok({"type": "array", "items": {"type": "object"}})}}},
    "/.well-known/webauthn": {"get": {"summary": "WebAuthn related origins", "operationId": "relatedOrigins",
        "responses": {"200": ok({"type": "object", "properties": {"origins": {"type": "array", "items": {"type": "string"}}}})}}},
    "/.well-known/passkey-endpoints": {"get": {"summary": "Passkey enroll / manage URLs", "operationId": "passkeyEndpoints",
        "responses": {"200": ok({"type": "object", "properties": {"enroll": {"type": "string"}, "manage": {"type": "string"}}})}}},
    "/openapi.json": {"get": {"summary": "This document", "operationId": "openapi", "responses": {"200": ok({"type": "object"})}}},
    "/signup": {"get": {"summary": "Compatibility API (reference Vapor apps): start a sign-up", "operationId": "compatSignup", "tags": ["compatibility"],
        "description": "The challenge and user.id are base64url strings whose UTF-8 bytes the reference apps hand to the authenticator; passkeyd verifies exactly that.",
        "parameters": [{"name": "username", "in": "query", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": ok({"type": "object", "required": ["challenge", "userId"], "properties": {
            "challenge": {"type": "object", "required": ["attestation", "challenge", "pubKeyCredParams", "rp", "timeout", "user"]},
            "userId": {"type": "string", "format": "uuid"}}}), **error_responses(400, 409, 429, 503)}}},
    "/makeCredential": {"post": {"summary": "Compatibility API: finish the sign-up", "operationId": "compatMakeCredential", "tags": ["compatibility"],
        "parameters": [{"name": "userId", "in": "query", "required": True, "schema": {"type": "string", "format": "uuid"}}],
        "requestBody": json_body(ref("RegistrationResponseJSON")),
        "responses": {"200": ok({"type": "object", "maxProperties": 0}), **error_responses(400, 409, 413, 429, 503)}}},
    "/authenticate": {
        "get": {"summary": "Compatibility API: request options for a username", "operationId": "compatAuthenticateOptions", "tags": ["compatibility"],
                "parameters": [{"name": "username", "in": "query", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": ok({"type": "object", "required": ["challenge", "timeout", "rpId", "allowCredentials", "userVerification"]}), **error_responses(400, 503)}},
        "post": {"summary": "Compatibility API: verify an assertion; the body also carries a session token", "operationId": "compatAuthenticate", "tags": ["compatibility"],
                 "parameters": [{"name": "username", "in": "query", "required": True, "schema": {"type": "string"}}],
                 "requestBody": json_body(ref("AuthenticationResponseJSON")),
                 "responses": {"200": ok({"type": "object", "required": ["verified", "token", "expiresAt"], "properties": {"verified": {"const": True}, "token": {"type": "string"}, "expiresAt": {"type": "string", "format": "date-time"}}}), **error_responses(400, 401, 409, 413, 429, 503)}}},
    "/healthz": {"get": {"summary": "Liveness: the process answers", "operationId": "healthz", "responses": {"200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/readyz": {"get": {"summary": "Readiness: the database answers too", "operationId": "readyz", "responses": {"200": {"description": "ready", "content": {"text/plain": {"schema": {"type": "string"}}}}, **error_responses(503)}}},
    "/metrics": {"get": {"summary": "Prometheus metrics (text exposition); behind a bearer token when metricsToken is set", "operationId": "metrics",
                         "responses": {"200": {"description": "Prometheus text format 0.0.4", "content": {"text/plain": {"schema": {"type": "string"}}}}, **error_responses(401, 503)}}},
}

doc = {
    "openapi": "3.1.0",
    "info": {"title": "passkeyd API", "version": "1.0.0",
             "description": "Passkey (WebAuthn) sign-in. Options and responses use the W3C WebAuthn Level 3 JSON encodings. Errors: HTTP status plus {\"error\": {\"code\", \"message\"}}; codes are stable:\n\n" +
                            "\n".join(f"- `{c}`: {d}" for c, d in sorted(ERROR_CODES.items()))},
    "paths": paths,
    "components": {
        "schemas": schemas,
        "responses": {"Error": {"description": "An error with a stable code", "content": {"application/json": {"schema": ref("Error")}}}},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The session token from a verify response"},
                            "cookie": {"type": "apiKey", "in": "cookie", "name": "passkeyd_session"}},
    },
}
print(json.dumps(doc, indent=2, ensure_ascii=False))
