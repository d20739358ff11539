import ArgumentParser
import Foundation
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore
import WebAuthn
import X509

/// `passkeyd mds import|status`: the FIDO Metadata Service v3 BLOB, downloaded elsewhere (this
/// server is offline) and brought in by hand (docs/policy.md, "FIDO Metadata (MDS3)").
struct MDS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mds", abstract: "FIDO Metadata Service (MDS3): import a downloaded BLOB, or show the one stored.",
        subcommands: [Import.self, Status.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Verify a metadata BLOB (its chain must lead to the MDS root, at the current time) and store it; every instance loads it within 5 minutes."
        )
        @OptionGroup var options: ServerOptions
        @Argument(help: "The BLOB as downloaded (a JWT, e.g. blob.jwt).") var file: String
        @Option(help: "PEM file of the MDS root certificate (default: the mdsRootCertificate setting).") var root: String?
        @Flag(help: "Store it even when the stored BLOB's number is the same or greater (a deliberate rollback).") var force = false

        func run() async throws {
            try options.refuseTenant("mds import")
            let loaded = try options.load()
            let roots = try MDS.roots(root, loaded: loaded)
            let blob = try MDS.readBLOB(file)
            let metadata: FIDOMetadata
            do {
                metadata = try await FIDOMetadata.verify(blob: blob, roots: roots, at: Date())
            } catch {
                throw MDS.failure("\(file) refused: \(error.reason)")
            }
            let (store, _) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.mds"))
            defer { (store as? PostgresStore)?.close() }
            do {
                try await store.saveMetadataBLOB(
                    MetadataBLOBRecord(number: metadata.number, nextUpdate: metadata.nextUpdateDay, blob: blob, importedAt: Date()),
                    force: force)
            } catch let error as StoreError where error.code == .outdated {
                throw MDS.failure("\(file) refused: \(error.reason); pass --force to store it anyway")
            }
            for warning in metadata.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
            print(
                "imported FIDO metadata BLOB no. \(metadata.number): \(metadata.entries.count) entries, next update \(metadata.nextUpdateDay)"
            )
            if metadata.isStale(at: Date()) {
                FileHandle.standardError.write(
                    Data("warning: its next update (\(metadata.nextUpdateDay)) has passed: download a newer BLOB\n".utf8))
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "What is stored: the BLOB's number, next update, when it was imported, and whether it verifies now.")
        @OptionGroup var options: ServerOptions
        @Option(help: "PEM file of the MDS root certificate (default: the mdsRootCertificate setting).") var root: String?

        func run() async throws {
            try await AdminContext.with(options) { context in
                guard let record = try await context.store.metadataBLOB() else {
                    print("no FIDO metadata BLOB is stored (passkeyd mds import FILE.jwt)")
                    return
                }
                let now = Date()
                let stale = MDS.isPast(record.nextUpdate, now: now)
                print(
                    "FIDO metadata BLOB no. \(record.number), next update \(record.nextUpdate)\(stale ? " (stale)" : ""), imported \(record.importedAt)"
                )
                let roots = root != nil ? try MDS.roots(root, loaded: context.loaded) : context.loaded.domain.mdsRootCertificates
                guard !roots.isEmpty else {
                    print("not verified: no mdsRootCertificate is configured (the server does not use it)")
                    return
                }
                do {
                    let metadata = try await FIDOMetadata.verify(blob: record.blob, roots: roots, at: now)
                    let refused = metadata.entries.values.filter { $0.refusal != nil }.count
                    print(
                        "verifies with the MDS root now: \(metadata.entries.count) entries (\(refused) refused by their status), \(metadata.skippedEntries) without an AAGUID skipped"
                    )
                } catch let error as WebAuthnError {
                    throw MDS.failure("does not verify now: \(error.reason)")
                }
            }
        }
    }

    /// `--root`, else the configured `mdsRootCertificate`; a usage error without either.
    static func roots(_ path: String?, loaded: ServerSettings) throws -> [Certificate] {
        if let path {
            do {
                return try ServerConfiguration.mdsRoots(path: path)
            } catch {
                throw ValidationError("--root: \(error.problem)")
            }
        }
        guard !loaded.domain.mdsRootCertificates.isEmpty else {
            throw ValidationError(
                "no MDS root certificate: pass --root ROOT.pem or set mdsRootCertificate (PASSKEYD_MDS_ROOT_CERTIFICATE) to FIDO's published root"
            )
        }
        return loaded.domain.mdsRootCertificates
    }

    /// The file's text, refused past ``FIDOMetadata/maxBLOBSize`` before it is read.
    static func readBLOB(_ path: String) throws -> String {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        guard let size else { throw ValidationError("cannot read \(path)") }
        guard size <= FIDOMetadata.maxBLOBSize else {
            throw failure("\(path) refused: \(size) bytes, over the \(FIDOMetadata.maxBLOBSize / 1024 / 1024) MiB a BLOB may have")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        guard let text = String(data: data, encoding: .utf8) else { throw failure("\(path) refused: not UTF-8 text (a JWT)") }
        return text
    }

    static func isPast(_ day: String, now: Date) -> Bool {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.date(from: day).map { now >= $0 } ?? false
    }

    /// One line on standard error, then exit 1 (a verification that failed); nothing is stored.
    static func failure(_ line: String) -> ExitCode {
        FileHandle.standardError.write(Data((line + "\n").utf8))
        return ExitCode(1)
    }
}
