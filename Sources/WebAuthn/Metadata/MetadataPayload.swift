import Foundation
import X509

/// Reads the BLOB's payload, the `MetadataBLOBPayload` dictionary (MDS3 §3.1.6):
///
/// ```
/// { legalHeader: text, no: int, nextUpdate: "YYYY-MM-DD",
///   entries: [ { ? aaid, ? aaguid, ? attestationCertificateKeyIdentifiers: [text],
///                ? metadataStatement: { ? description, ? icon, ? attestationRootCertificates: [base64 DER], … },
///                statusReports: [ { status: text, ? effectiveDate: "YYYY-MM-DD", … } ],
///                ? timeOfLastStatusChange: "YYYY-MM-DD", … } ] }
/// ```
/// Members not listed are not read. The JSON itself is read strictly (``JSONReader``: duplicate
/// keys, bad UTF-8, deep nesting refused).
enum MetadataPayload {
    /// Most status reports, and most attestation roots, read for one entry.
    static let maxStatusReports = 1000
    static let maxRootCertificates = 64
    /// An icon over this many bytes, or not a `data:image/…` URL, is dropped (MDS icons are a few KiB).
    static let maxIconSize = 256 * 1024

    static func read(_ bytes: [UInt8]) throws(WebAuthnError) -> FIDOMetadata {
        do throws(WebAuthnError) {
            return try readPayload(bytes)
        } catch {
            guard error.code == .malformedJSON else { throw error }
            throw FIDOMetadata.invalid("the BLOB payload is not the MDS3 payload: \(error.reason)")
        }
    }

    private static func readPayload(_ bytes: [UInt8]) throws(WebAuthnError) -> FIDOMetadata {
        let payload = try JSONObject(bytes: bytes)
        guard let number = try payload.optionalInt("no"), number >= 0 else {
            throw FIDOMetadata.invalid("the payload's no is missing or not a whole number")
        }
        let nextUpdateText = try payload.string("nextUpdate")
        guard let nextUpdate = MetadataDay.parse(nextUpdateText) else {
            throw FIDOMetadata.invalid("the payload's nextUpdate \"\(nextUpdateText)\" is not YYYY-MM-DD")
        }
        let items = try objects(payload, "entries") ?? []
        guard items.count <= FIDOMetadata.maxEntries else {
            throw FIDOMetadata.invalid("the payload has \(items.count) entries, over \(FIDOMetadata.maxEntries)")
        }
        var entries: [AAGUID: MetadataEntry] = [:]
        var skipped = 0
        var warnings: [String] = []
        for (index, item) in items.enumerated() {
            // §3.2 step 7a: Ignore the entry if the AAID, AAGUID or attestationCertificateKeyIdentifiers
            // is not relevant to the relying party. A WebAuthn relying party matches AAGUIDs only.
            guard let text = try item.optionalString("aaguid") else {
                skipped += 1
                continue
            }
            guard let aaguid = AAGUID(text) else {
                throw FIDOMetadata.invalid("entries[\(index)].aaguid \"\(text)\" is not an AAGUID")
            }
            guard entries[aaguid] == nil else {
                throw FIDOMetadata.invalid("entries list the AAGUID \(aaguid) more than once")
            }
            entries[aaguid] = try entry(item, aaguid: aaguid, index: index, warnings: &warnings)
        }
        return FIDOMetadata(
            number: number, nextUpdate: nextUpdate, legalHeader: try payload.optionalString("legalHeader") ?? "", entries: entries,
            skippedEntries: skipped, warnings: Array(warnings.prefix(100)))
    }

    private static func entry(_ item: JSONObject, aaguid: AAGUID, index: Int, warnings: inout [String]) throws(WebAuthnError)
        -> MetadataEntry
    {
        let statement = try item.optionalObject("metadataStatement")
        var roots: [Certificate] = []
        let encodedRoots = try statement?.optionalStringArray("attestationRootCertificates") ?? []
        guard encodedRoots.count <= maxRootCertificates else {
            throw FIDOMetadata.invalid("entries[\(index)] lists over \(maxRootCertificates) attestation root certificates")
        }
        for (position, text) in encodedRoots.enumerated() {
            // A root this library cannot read is left out (its authenticators' attestations are
            // then untrusted), rather than refusing every other entry with it.
            guard let der = Base64.decode(text, flavor: .any), let certificate = try? Certificate(derEncoded: der) else {
                warnings.append("\(aaguid): attestationRootCertificates[\(position)] is not a readable DER certificate; left out")
                continue
            }
            roots.append(certificate)
        }
        var icon = try statement?.optionalString("icon")
        // Only an image, inline: nothing a page showing it would fetch or run.
        if let text = icon, !text.hasPrefix("data:image/") || text.utf8.count > maxIconSize { icon = nil }

        // §3.2 step 7c: Check whether the status report of the authenticator model has changed
        // compared to the cached entry by looking at the fields timeOfLastStatusChange and
        // statusReport. (The whole list is kept; MetadataEntry.latestStatus picks the one in force.)
        let reportObjects = try objects(item, "statusReports") ?? []
        guard reportObjects.count <= maxStatusReports else {
            throw FIDOMetadata.invalid("entries[\(index)] has over \(maxStatusReports) status reports")
        }
        var reports: [StatusReport] = []
        for report in reportObjects {
            let status = try report.string("status")
            var effective: Date?
            if let text = try report.optionalString("effectiveDate") {
                guard let date = MetadataDay.parse(text) else {
                    throw FIDOMetadata.invalid("entries[\(index)] has a status report whose effectiveDate \"\(text)\" is not YYYY-MM-DD")
                }
                effective = date
            }
            reports.append(StatusReport(status: AuthenticatorStatus(rawValue: status), effectiveDate: effective))
        }
        return MetadataEntry(
            aaguid: aaguid, description: try statement?.optionalString("description"), icon: icon, attestationRootCertificates: roots,
            statusReports: reports, timeOfLastStatusChange: try item.optionalString("timeOfLastStatusChange"))
    }

    /// The array-of-objects member `key`, or `nil` when it is missing or `null`.
    private static func objects(_ object: JSONObject, _ key: String) throws(WebAuthnError) -> [JSONObject]? {
        let name = object.path.isEmpty ? key : "\(object.path).\(key)"
        switch object.node(key) {
        case nil, .null?: return nil
        case .array(let items)?:
            var out: [JSONObject] = []
            out.reserveCapacity(items.count)
            for (index, item) in items.enumerated() { out.append(try JSONObject(node: item, path: "\(name)[\(index)]")) }
            return out
        default: throw FIDOMetadata.invalid("\(name) is not an array")
        }
    }
}

/// The MDS's dates: `YYYY-MM-DD` (a day, read as its 00:00 UTC).
enum MetadataDay {
    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar
    }()

    static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            let date = calendar.date(from: DateComponents(year: year, month: month, day: day))
        else { return nil }
        // No rolling over: 2025-02-30 is not a day.
        let back = calendar.dateComponents([.year, .month, .day], from: date)
        guard back.year == year, back.month == month, back.day == day else { return nil }
        return date
    }

    static func format(_ date: Date) -> String {
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        func pad(_ value: Int?, _ width: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2))"
    }
}
