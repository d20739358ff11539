import Foundation

/// The FIDO metadata BLOB: one row, replaced only by a BLOB with a greater number.
extension SQLStore {
    public func saveMetadataBLOB(_ record: MetadataBLOBRecord, force: Bool) async throws {
        let forUpdate = dialect.forUpdate
        try await upkeepTransaction { [self] db in
            // PostgreSQL: two imports at once queue on the row; the second sees the first's number.
            if !force, let stored = try await db.first("SELECT number FROM fido_metadata WHERE id = 1\(sql: forUpdate)") {
                let number = try stored.integer("number")
                // MDS3 §3.2 step 5: Verify that the number (no) is bigger than the number of the
                // last metadata BLOB object that was processed successfully.
                guard Int64(record.number) > number else {
                    throw StoreError(
                        .outdated,
                        "FIDO metadata BLOB no. \(number) is stored; no. \(record.number) is not newer (a replayed or older BLOB)")
                }
            }
            try await db.execute(
                """
                INSERT INTO fido_metadata (id, number, next_update, blob, imported_at)
                VALUES (1, \(record.number), \(record.nextUpdate), \(record.blob), \(record.importedAt))
                ON CONFLICT (id) DO UPDATE SET number = excluded.number, next_update = excluded.next_update, blob = excluded.blob,
                    imported_at = excluded.imported_at
                """)
        }
    }

    public func metadataBLOB() async throws -> MetadataBLOBRecord? {
        try await upkeepReader.first("SELECT * FROM fido_metadata WHERE id = 1").map { row in
            MetadataBLOBRecord(
                number: Int(try row.integer("number")), nextUpdate: try row.text("next_update"), blob: try row.text("blob"),
                importedAt: try row.date("imported_at"))
        }
    }

    public func metadataBLOBNumber() async throws -> Int? {
        try await upkeepReader.first("SELECT number FROM fido_metadata WHERE id = 1").map { Int(try $0.integer("number")) }
    }
}
