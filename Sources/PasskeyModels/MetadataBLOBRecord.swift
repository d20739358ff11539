import Foundation

/// A FIDO metadata BLOB (MDS3) as stored: the JWS text as downloaded, and what the importer read
/// from it once verified. Whoever loads it verifies the text again; the number and date are kept
/// for ordering (a newer BLOB has a greater number) and for `passkeyd mds status`.
public struct MetadataBLOBRecord: Sendable, Equatable {
    /// The payload's `no`.
    public var number: Int
    /// The payload's `nextUpdate`, `YYYY-MM-DD`.
    public var nextUpdate: String
    /// The JWS compact serialization.
    public var blob: String
    public var importedAt: Date

    public init(number: Int, nextUpdate: String, blob: String, importedAt: Date) {
        self.number = number
        self.nextUpdate = nextUpdate
        self.blob = blob
        self.importedAt = importedAt
    }
}
