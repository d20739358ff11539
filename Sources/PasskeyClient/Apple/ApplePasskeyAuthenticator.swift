// The platform authenticator on Apple platforms: AuthenticationServices' passkey sheet and
// AutoFill. It is compiled on Apple platforms; on Linux the build type-checks it against
// `Tests/Shims/AuthenticationServices` (module `AuthenticationServicesShim`), which declares
// exactly the API used here (target `PasskeyClientAppleCheck`), so a wrong name or type fails
// the Linux build too.
#if (canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))) || PASSKEYCLIENT_APPLE_SHIM
    import Crypto
    import Foundation
    #if PASSKEYCLIENT_APPLE_SHIM
        import AuthenticationServicesShim
        import PasskeyClient
    #else
        import AuthenticationServices
    #endif

    /// Passkeys through AuthenticationServices (iOS 16, macOS 13, visionOS 1 and later): the
    /// system sheet for sign-up and sign-in, keyboard suggestions for AutoFill.
    ///
    /// The app needs the Associated Domains entitlement `webcredentials:<rp id>`, and passkeyd
    /// must list the app in `appleAppIDs` (it then serves `apple-app-site-association`).
    @available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
    public final class ApplePasskeyAuthenticator: PasskeyAuthenticator, Sendable {
        private let anchor: @MainActor @Sendable () -> ASPresentationAnchor
        private let prefersImmediatelyAvailableCredentials: Bool

        /// - Parameters:
        ///   - prefersImmediatelyAvailableCredentials: a modal sign-in with no passkey on the device
        ///     fails at once (``PasskeyClientError/noPasskeyOnDevice``) instead of offering a
        ///     passkey from a nearby phone (the QR code); for a "Sign in" button shown before a
        ///     password form.
        ///   - presentationAnchor: the window the sheet appears over.
        public init(
            prefersImmediatelyAvailableCredentials: Bool = false,
            presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor
        ) {
            self.prefersImmediatelyAvailableCredentials = prefersImmediatelyAvailableCredentials
            self.anchor = presentationAnchor
        }

        public func register(_ options: RegistrationRequest) async throws -> RegistrationResult {
            let output = try await perform(autoFill: false, immediately: false) {
                let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: options.relyingPartyID)
                let request = provider.createCredentialRegistrationRequest(
                    challenge: options.challenge, name: options.userName, userID: options.userID)
                request.displayName = options.userDisplayName
                request.userVerificationPreference = .init(rawValue: options.userVerification)
                request.attestationPreference = .init(rawValue: options.attestation)
                if #available(iOS 17.4, macOS 14.4, visionOS 1.1, *) {
                    // The device refuses to make a second passkey for the same account.
                    request.excludedCredentials = options.excludeCredentials.map {
                        ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0.id)
                    }
                }
                if #available(iOS 18.0, macOS 15.0, visionOS 2.0, *), let prf = options.prf {
                    // WebAuthn PRF: support, and an output at once when the salt is given.
                    request.prf = prf.eval.map { .inputValues(Self.inputValues($0)) } ?? .checkForSupport
                }
                return request
            }
            guard case .registration(let result) = output else {
                throw PasskeyAuthenticatorError.failed("AuthenticationServices returned no registration")
            }
            return result
        }

        public func authenticate(_ options: AssertionRequest) async throws -> AssertionResult {
            let autoFill = options.presentation == .autoFill
            let output = try await perform(autoFill: autoFill, immediately: prefersImmediatelyAvailableCredentials && !autoFill) {
                let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: options.relyingPartyID)
                let request = provider.createCredentialAssertionRequest(challenge: options.challenge)
                request.allowedCredentials = options.allowCredentials.map {
                    ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0.id)
                }
                request.userVerificationPreference = .init(rawValue: options.userVerification)
                if #available(iOS 18.0, macOS 15.0, visionOS 2.0, *), let prf = options.prf {
                    // evalByCredential: each passkey's own salt, which wins over `eval` for it.
                    let perCredential = prf.evalByCredential.mapValues(Self.inputValues)
                    if let eval = prf.eval {
                        request.prf = .inputValues(
                            Self.inputValues(eval), perCredentialInputValues: perCredential.isEmpty ? nil : perCredential)
                    } else if !perCredential.isEmpty {
                        request.prf = .perCredentialInputValues(perCredential)
                    }
                }
                return request
            }
            guard case .assertion(let result) = output else {
                throw PasskeyAuthenticatorError.failed("AuthenticationServices returned no assertion")
            }
            return result
        }

        /// Runs one request on an `ASAuthorizationController`; cancelling the calling task cancels it.
        @MainActor
        private func perform(autoFill: Bool, immediately: Bool, _ makeRequest: () -> ASAuthorizationRequest) async throws -> Ceremony.Output
        {
            let controller = ASAuthorizationController(authorizationRequests: [makeRequest()])
            // The controller holds its delegate weakly: `ceremony` lives until this returns.
            let ceremony = Ceremony(anchor: anchor(), controller: controller)
            controller.delegate = ceremony
            controller.presentationContextProvider = ceremony
            do {
                return try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        ceremony.continuation = continuation
                        if autoFill {
                            #if os(iOS) || os(visionOS) || PASSKEYCLIENT_APPLE_SHIM
                                controller.performAutoFillAssistedRequests()
                            #else
                                ceremony.finish(.failure(PasskeyAuthenticatorError.unsupported("passkey AutoFill needs iOS or visionOS")))
                            #endif
                        } else if immediately {
                            controller.performRequests(options: .preferImmediatelyAvailableCredentials)
                        } else {
                            controller.performRequests()
                        }
                    }
                } onCancel: {
                    Task { @MainActor in ceremony.cancel() }
                }
            } catch let error as ASAuthorizationError {
                throw Self.authenticatorError(error)
            }
        }

        @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
        static func inputValues(_ values: PRFInputValues) -> ASAuthorizationPublicKeyCredentialPRFAssertionInput.InputValues {
            .init(saltInput1: values.first, saltInput2: values.second)
        }

        static func authenticatorError(_ error: ASAuthorizationError) -> PasskeyAuthenticatorError {
            switch error.code {
            case .canceled: return .cancelled
            // With preferImmediatelyAvailableCredentials (and AutoFill): nothing to offer here.
            case .notInteractive: return .noCredentials
            default:
                // 1006 is `.matchedExcludedCredential` (iOS 18, macOS 15): the device already has
                // one of excludeCredentials. Compared by number so older SDKs build this file.
                if error.code.rawValue == 1006 { return .excludedCredentialExists }
                return .failed("AuthenticationServices error \(error.code.rawValue)")
            }
        }
    }

    /// The delegate of one controller: resumes the waiting task exactly once.
    @MainActor
    private final class Ceremony: NSObject {
        /// What the system returned, copied into values that may leave the main actor.
        enum Output: Sendable {
            case registration(RegistrationResult)
            case assertion(AssertionResult)
        }

        var continuation: CheckedContinuation<Output, any Error>?
        private let anchor: ASPresentationAnchor
        private let controller: ASAuthorizationController

        init(anchor: ASPresentationAnchor, controller: ASAuthorizationController) {
            self.anchor = anchor
            self.controller = controller
        }

        func finish(_ result: Result<Output, any Error>) {
            continuation?.resume(with: result)
            continuation = nil
        }

        static func output(_ authorization: ASAuthorization) throws -> Output {
            switch authorization.credential {
            case let registration as ASAuthorizationPlatformPublicKeyCredentialRegistration:
                guard let attestationObject = registration.rawAttestationObject else {
                    throw PasskeyAuthenticatorError.failed("AuthenticationServices returned no attestation object")
                }
                let attachment = Self.attachment(registration)
                return .registration(
                    RegistrationResult(
                        credentialID: registration.credentialID, clientDataJSON: registration.rawClientDataJSON,
                        attestationObject: attestationObject, transports: attachment == "platform" ? ["internal", "hybrid"] : [],
                        attachment: attachment, prf: Self.prf(registration)))
            case let assertion as ASAuthorizationPlatformPublicKeyCredentialAssertion:
                guard let authenticatorData = assertion.rawAuthenticatorData, let signature = assertion.signature else {
                    throw PasskeyAuthenticatorError.failed("AuthenticationServices returned no signature")
                }
                return .assertion(
                    AssertionResult(
                        credentialID: assertion.credentialID, clientDataJSON: assertion.rawClientDataJSON,
                        authenticatorData: authenticatorData, signature: signature, userHandle: assertion.userID,
                        attachment: Self.attachment(assertion), prf: Self.prf(assertion)))
            default:
                throw PasskeyAuthenticatorError.failed("AuthenticationServices returned another kind of credential")
            }
        }

        /// The PRF outputs as bytes (the system gives `SymmetricKey`s); `nil` before iOS 18 / macOS 15
        /// or when PRF was not asked.
        private static func prf(_ credential: ASAuthorizationPlatformPublicKeyCredentialRegistration) -> PRFOutputs? {
            guard #available(iOS 18.0, macOS 15.0, visionOS 2.0, *), let prf = credential.prf else { return nil }
            return PRFOutputs(enabled: prf.isSupported, first: prf.first.map(bytes), second: prf.second.map(bytes))
        }

        private static func prf(_ credential: ASAuthorizationPlatformPublicKeyCredentialAssertion) -> PRFOutputs? {
            guard #available(iOS 18.0, macOS 15.0, visionOS 2.0, *), let prf = credential.prf else { return nil }
            return PRFOutputs(first: bytes(prf.first), second: prf.second.map(bytes))
        }

        private static func bytes(_ key: SymmetricKey) -> Data { key.withUnsafeBytes { Data($0) } }

        private static func attachment(_ credential: ASAuthorizationPlatformPublicKeyCredentialRegistration) -> String {
            if #available(iOS 16.6, macOS 13.5, visionOS 1.0, *), credential.attachment == .crossPlatform { return "cross-platform" }
            return "platform"
        }

        private static func attachment(_ credential: ASAuthorizationPlatformPublicKeyCredentialAssertion) -> String {
            if #available(iOS 16.6, macOS 13.5, visionOS 1.0, *), credential.attachment == .crossPlatform { return "cross-platform" }
            return "platform"
        }

        /// The waiting task ends at once (`cancelled`), whether or not the system later calls
        /// the delegate (it may not, for a request cancelled before it was presented).
        func cancel() {
            guard continuation != nil else { return }
            finish(.failure(CancellationError()))
            controller.cancel()
        }
    }

    extension Ceremony: @preconcurrency ASAuthorizationControllerDelegate {
        func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization) {
            finish(Result { try Self.output(authorization) })
        }

        func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {
            finish(.failure(error))
        }
    }

    extension Ceremony: @preconcurrency ASAuthorizationControllerPresentationContextProviding {
        func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
    }
#endif
