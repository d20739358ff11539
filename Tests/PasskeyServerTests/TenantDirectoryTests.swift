import Foundation
import Logging
import PasskeyCore
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyServer

/// The tenant directory's upkeep (issue 44): a tenant built before a newer FIDO metadata BLOB was
/// imported takes it at the next refresh (a revoked model is then refused in that tenant too),
/// and a changed or removed tenant loses its built service at the next reload.
@Suite struct TenantDirectoryTests {
    static let model = AAGUID("c0ffee00-0000-4000-8000-00000000cafe")!

    static func directory(mds: MetadataBLOBIssuer, in folder: URL) async throws -> (TenantDirectory, any PasskeyStore) {
        let rootFile = folder.appendingPathComponent("mds-root.pem")
        try Data(mds.rootPEM.utf8).write(to: rootFile)
        let store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        let now = Date()
        try await store.addTenant(
            TenantRecord(
                id: "alpha", hosts: ["a.localhost"], settings: #"{"rpID":"a.localhost","origins":["http://a.localhost:8080"]}"#,
                createdAt: now, updatedAt: now))
        let settings = try ServerSettings(
            environment: [
                "PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_MDS_ROOT_CERTIFICATE": rootFile.path,
            ], file: nil)
        let service = try PasskeyService(configuration: settings.domain, store: store)
        let directory = TenantDirectory(
            server: settings, edge: settings.edge, defaultService: service,
            defaultResponder: PasskeyServer.router(service: service, edge: settings.edge).buildResponder(), logger: Logger(label: "test"))
        try await directory.reload()
        return (directory, store)
    }

    @Test func aBuiltTenantTakesANewerMetadataBLOBAtTheNextRefresh() async throws {
        let folder = try ServeCommandFolder.make()
        defer { try? FileManager.default.removeItem(at: folder) }
        let mds = try MetadataBLOBIssuer()
        let (directory, store) = try await Self.directory(mds: mds, in: folder)
        #expect(try await directory.responder(tenant: "alpha") != nil)
        let alpha = try #require(directory.builtServices.first)
        #expect(alpha.fidoMetadata == nil)
        let blob = try mds.blob(number: 8, entries: [.init(aaguid: Self.model, description: "Leaky Key", status: "REVOKED")])
        try await store.saveMetadataBLOB(
            MetadataBLOBRecord(number: 8, nextUpdate: "2027-01-01", blob: blob, importedAt: Date()), force: false)
        await directory.refreshMetadata()
        #expect(alpha.fidoMetadata?.number == 8)
    }

    /// `passwordHashConcurrency` bounds the process, not each tenant: a password flood spread
    /// over many tenants hashes no more at once (each scrypt hash holds 128 MiB) than one
    /// tenant's would.
    @Test func everyTenantHashesPasswordsInTheServersOnePool() async throws {
        let folder = try ServeCommandFolder.make()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (directory, _) = try await Self.directory(mds: try MetadataBLOBIssuer(), in: folder)
        _ = try await directory.responder(tenant: "alpha")
        let alpha = try #require(directory.builtServices.first)
        #expect(alpha.passwordWork === directory.defaultService.passwordWork)
    }

    @Test func aChangedOrRemovedTenantLosesItsBuiltServiceAtTheNextReload() async throws {
        let folder = try ServeCommandFolder.make()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (directory, store) = try await Self.directory(mds: try MetadataBLOBIssuer(), in: folder)
        _ = try await directory.responder(tenant: "alpha")
        #expect(directory.builtServices.count == 1)
        let record = try #require(try await store.tenantRecords().first)
        var changed = record
        changed.settings = #"{"rpID":"a.localhost","origins":["http://a.localhost:8080"],"rpName":"Alpha"}"#
        changed.updatedAt = record.updatedAt.addingTimeInterval(1)
        #expect(try await store.updateTenant(changed, unchangedSince: nil))
        try await directory.reload()
        #expect(directory.builtServices.isEmpty)
        _ = try await directory.responder(tenant: "alpha")
        #expect(directory.builtServices.first?.configuration.rpName == "Alpha")
        #expect(try await store.removeTenant(id: "alpha", deleteData: true) == .removed)
        try await directory.reload()
        #expect(directory.builtServices.isEmpty)
        #expect(try await directory.responder(tenant: "alpha") == nil)
    }
}

/// A temporary folder for a test's files.
enum ServeCommandFolder {
    static func make() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-tenants-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }
}
