import Foundation
import Logging
import PasskeyStore
import ServiceLifecycle
import Synchronization
import WebAuthn

extension PasskeyService {
    /// How often every instance looks for a BLOB another one imported.
    package static let metadataRefreshInterval: Duration = .seconds(300)

    /// The FIDO metadata (MDS3) in force on this instance; `nil` until a stored BLOB verifies.
    public var fidoMetadata: FIDOMetadata? { metadataState.current }

    /// The FIDO metadata in force with when it was imported and loaded; `nil` until a stored BLOB verifies.
    public var fidoMetadataInForce: MetadataInForce? { metadataState.inForce }

    /// Loads the stored FIDO metadata BLOB when its number is greater than the one in force: verifies
    /// it against `mdsRootCertificates` at the current time (MDS3 §3.2 steps 2–4) and puts it in
    /// force for registrations, provider names, `/readyz` and the metrics. A BLOB that does not
    /// verify is logged once and left aside; the one in force, if any, stays. `source`: the store
    /// the BLOB is read from (the server's, for a tenant with a database of its own: the BLOB is
    /// the server's, imported once); nil: this service's.
    public func refreshMetadata(from source: (any PasskeyStore)? = nil) async {
        let store = source ?? self.store
        let roots = configuration.mdsRootCertificates
        let number: Int
        do {
            guard let stored = try await store.metadataBLOBNumber() else { return }
            number = stored
        } catch {
            logger.warning("FIDO metadata not read from the store", metadata: ["error": "\(error)"])
            return
        }
        // Only a greater number replaces the BLOB in force (MDS3 §3.2 step 5): a lower one written
        // to the store (a forced rollback) takes effect when the server starts.
        guard number > (metadataState.current?.number ?? Int.min), !metadataState.wasRefused(number) else { return }
        guard !roots.isEmpty else {
            metadataState.refuse(number)
            logger.warning("a FIDO metadata BLOB (no. \(number)) is stored but mdsRootCertificate is not set: it is not used")
            return
        }
        do {
            guard let record = try await store.metadataBLOB() else { return }
            let verified = try await FIDOMetadata.verify(blob: record.blob, roots: roots, at: now())
            metadataState.replace(verified, importedAt: record.importedAt, loadedAt: now())
            logger.info(
                "FIDO metadata in force",
                metadata: [
                    "no": "\(verified.number)", "entries": "\(verified.entries.count)", "nextUpdate": "\(verified.nextUpdateDay)",
                ])
            if verified.isStale(at: now()) {
                logger.warning("FIDO metadata is stale: import a newer BLOB", metadata: ["nextUpdate": "\(verified.nextUpdateDay)"])
            }
        } catch let error as WebAuthnError {
            metadataState.refuse(number)
            logger.error(
                "the stored FIDO metadata BLOB does not verify; it is not used", metadata: ["no": "\(number)", "error": "\(error)"])
        } catch {
            logger.warning("FIDO metadata not read from the store", metadata: ["error": "\(error)"])
        }
    }

    /// The passkey provider's name for `aaguid`: the FIDO metadata's description when it has
    /// an entry, else the bundled AAGUID list's name.
    package func providerName(_ aaguid: AAGUID) -> String? {
        fidoMetadata?.entry(for: aaguid)?.description ?? aaguid.providerName
    }

    /// The `/readyz` warning when the metadata in force is past its `nextUpdate`.
    package var metadataWarning: String? {
        guard let current = fidoMetadata, current.isStale(at: now()) else { return nil }
        return "warning: FIDO metadata is stale (nextUpdate \(current.nextUpdateDay))"
    }
}

/// A verified FIDO metadata BLOB in force on an instance, with its two moments.
public struct MetadataInForce: Sendable {
    public let metadata: FIDOMetadata
    /// When the BLOB was stored (`passkeyd mds import`).
    public let importedAt: Date
    /// When this instance verified it and put it in force.
    public let loadedAt: Date
}

/// The FIDO metadata in force and the relying party that judges registrations with it: swapped
/// whole when a newer BLOB is loaded, read once per registration.
package final class MetadataState: Sendable {
    private struct State {
        var inForce: MetadataInForce?
        var relyingParty: RelyingParty
        /// BLOB numbers that did not verify (not tried again).
        var refused: Set<Int> = []
    }
    private let base: RelyingParty
    private let state: Mutex<State>

    package init(relyingParty: RelyingParty) {
        base = relyingParty
        state = Mutex(State(inForce: nil, relyingParty: relyingParty))
    }

    package var current: FIDOMetadata? { state.withLock { $0.inForce?.metadata } }
    package var inForce: MetadataInForce? { state.withLock { $0.inForce } }
    package var relyingParty: RelyingParty { state.withLock { $0.relyingParty } }

    package func replace(_ metadata: FIDOMetadata, importedAt: Date, loadedAt: Date) {
        var configuration = base.configuration
        configuration.attestationPolicy.metadata = metadata
        // The configuration was validated when `base` was made; metadata changes nothing it checks.
        let relyingParty = (try? RelyingParty(configuration)) ?? base
        state.withLock {
            $0.inForce = MetadataInForce(metadata: metadata, importedAt: importedAt, loadedAt: loadedAt)
            $0.relyingParty = relyingParty
        }
    }

    package func refuse(_ number: Int) { _ = state.withLock { $0.refused.insert(number) } }
    package func wasRefused(_ number: Int) -> Bool { state.withLock { $0.refused.contains(number) } }
}

/// Reloads the FIDO metadata every ``PasskeyService/metadataRefreshInterval`` (another instance
/// may have imported a newer BLOB).
package struct MetadataRefresher: Service {
    package let service: PasskeyService
    package init(service: PasskeyService) { self.service = service }

    package func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: PasskeyService.metadataRefreshInterval) }
            guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return }
            await service.refreshMetadata()
        }
    }
}
