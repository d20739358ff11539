// The session in the Keychain on Apple platforms; type-checked on Linux against
// `Tests/Shims/Security` (module `SecurityShim`, target `PasskeyClientAppleCheck`).
#if ((os(iOS) || os(macOS) || os(visionOS) || os(tvOS) || os(watchOS)) && canImport(Security)) || PASSKEYCLIENT_APPLE_SHIM
    import Foundation
    #if PASSKEYCLIENT_APPLE_SHIM
        import PasskeyClient
        import SecurityShim
    #else
        import Security
    #endif

    /// Sessions as generic-password items (service ``service``, account: the server URL), readable
    /// after the first unlock and never synced or restored to another device.
    public struct KeychainSessionStore: SessionStore {
        public let service: String

        public init(service: String = "passkeyd") { self.service = service }

        public func load(server: String) async throws -> StoredSession? {
            var query = query(server)
            query[kSecReturnData as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess, let data = item as? Data else {
                throw PasskeyClientError.unsupported("the Keychain answered \(status)")
            }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return try? decoder.decode(StoredSession.self, from: data)
        }

        public func save(_ session: StoredSession?, server: String) async throws {
            guard let session else {
                let status = SecItemDelete(query(server) as CFDictionary)
                guard status == errSecSuccess || status == errSecItemNotFound else {
                    throw PasskeyClientError.unsupported("the Keychain answered \(status)")
                }
                return
            }
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            let data = try encoder.encode(session)
            // Updated in place (a failed add after a delete would lose the session).
            var status = SecItemUpdate(query(server) as CFDictionary, [kSecValueData as String: data] as CFDictionary)
            if status == errSecItemNotFound {
                var item = query(server)
                item[kSecValueData as String] = data
                item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
                status = SecItemAdd(item as CFDictionary, nil)
            }
            guard status == errSecSuccess else { throw PasskeyClientError.unsupported("the Keychain answered \(status)") }
        }

        private func query(_ server: String) -> [String: Any] {
            // The data protection keychain on macOS too (the legacy file keychain ignores
            // accessibility classes and may prompt).
            [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: server,
                kSecUseDataProtectionKeychain as String: true,
            ]
        }
    }
#endif
