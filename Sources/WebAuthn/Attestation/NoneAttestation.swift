/// `none` attestation (WebAuthn Level 3 §8.7): `attStmt = {}`.
enum NoneAttestation {
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        // §8.7 Verification procedure: "Return implementation-specific values representing
        // attestation type None and an empty attestation trust path." The statement must be empty.
        guard input.statement.mapValue?.isEmpty == true else {
            throw WebAuthnError(.attestationInvalid, "none attestation statement is not an empty map")
        }
        return StatementResult(type: .none, certificates: [])
    }
}
