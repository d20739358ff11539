import WebAuthn

/// What this client posts of its extension outputs, as an app does: never the PRF results (the
/// client's secret, WebAuthn §10.1.4: passkeyd refuses them with 400 `prf_output_posted`) nor a
/// large blob read back (the app's data). The software authenticator returns both, as a browser does.
enum Postable {
    static func results(_ results: [String: JSONValue]?) -> [String: JSONValue]? {
        guard var results else { return nil }
        if case .object(var prf)? = results["prf"], prf["results"] != nil {
            prf["results"] = nil
            results["prf"] = .object(prf)
        }
        if case .object(var largeBlob)? = results["largeBlob"], largeBlob["blob"] != nil {
            largeBlob["blob"] = nil
            results["largeBlob"] = .object(largeBlob)
        }
        return results
    }
}
