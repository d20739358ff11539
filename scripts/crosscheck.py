#!/usr/bin/env python3
"""Independent oracle: verifies a ceremony passkeyd accepted with py_webauthn (duo-labs).

Reads one JSON object on stdin:
  {"ceremony": "registration" | "authentication", "credential": {...RegistrationResponseJSON...},
   "challenge": "<b64url>", "origin": "...", "rpId": "...", "requireUserVerification": true,
   "credentialPublicKey": "<b64url COSE>", "signCount": 0}
Prints a JSON verdict and exits 0 when py_webauthn accepts, 1 when it rejects.
"""
import base64, json, sys

import webauthn
from webauthn.helpers.cose import COSEAlgorithmIdentifier


def b64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def main() -> int:
    req = json.load(sys.stdin)
    try:
        if req["ceremony"] == "registration":
            v = webauthn.verify_registration_response(
                credential=req["credential"], expected_challenge=b64(req["challenge"]), expected_rp_id=req["rpId"],
                expected_origin=req["origin"], require_user_verification=req.get("requireUserVerification", True),
                supported_pub_key_algs=list(COSEAlgorithmIdentifier))
            out = {"ok": True, "credentialId": base64.urlsafe_b64encode(v.credential_id).rstrip(b"=").decode(),
                   "credentialPublicKey": base64.urlsafe_b64encode(v.credential_public_key).rstrip(b"=").decode(),
                   "signCount": v.sign_count, "fmt": getattr(v.fmt, "value", v.fmt), "aaguid": v.aaguid}
        else:
            v = webauthn.verify_authentication_response(
                credential=req["credential"], expected_challenge=b64(req["challenge"]), expected_rp_id=req["rpId"],
                expected_origin=req["origin"], credential_public_key=b64(req["credentialPublicKey"]),
                credential_current_sign_count=req.get("signCount", 0),
                require_user_verification=req.get("requireUserVerification", True))
            out = {"ok": True, "newSignCount": v.new_sign_count}
    except Exception as error:  # py_webauthn raises many types; all mean "rejected"
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
