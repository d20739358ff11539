// A Linux stand-in for the part of Apple's AuthenticationServices that
// Sources/PasskeyClient/Apple/ApplePasskeyAuthenticator.swift uses, declared with the signatures of
// Apple's documentation (iOS 16–18 SDKs), so the Linux build type-checks the adapter. Nothing
// here runs: it is built only into the `PasskeyClientAppleCheck` target. Add a declaration only
// when the adapter starts using it, copied from Apple's documented signature.
import Crypto
import Foundation

/// `typealias ASPresentationAnchor = UIWindow` on iOS, `NSWindow` on macOS.
public typealias ASPresentationAnchor = UIWindow
open class UIWindow: NSObject {}

public protocol ASAuthorizationCredential: NSObjectProtocol {}
public protocol ASAuthorizationProvider: NSObjectProtocol {}

open class ASAuthorizationRequest: NSObject {}

public struct ASAuthorizationPublicKeyCredentialUserVerificationPreference: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let preferred = Self(rawValue: "preferred")
    public static let required = Self(rawValue: "required")
    public static let discouraged = Self(rawValue: "discouraged")
}

public struct ASAuthorizationPublicKeyCredentialAttestationKind: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let none = Self(rawValue: "none")
    public static let direct = Self(rawValue: "direct")
    public static let indirect = Self(rawValue: "indirect")
    public static let enterprise = Self(rawValue: "enterprise")
}

@available(iOS 16.6, macOS 13.5, *)
public enum ASAuthorizationPublicKeyCredentialAttachment: Int, Sendable {
    case platform = 0
    case crossPlatform = 1
}

open class ASAuthorizationPlatformPublicKeyCredentialDescriptor: NSObject {
    open var credentialID: Data
    public init(credentialID: Data) { self.credentialID = credentialID }
}

open class ASAuthorizationPlatformPublicKeyCredentialProvider: NSObject, ASAuthorizationProvider {
    open var relyingPartyIdentifier: String
    public init(relyingPartyIdentifier: String) { self.relyingPartyIdentifier = relyingPartyIdentifier }
    open func createCredentialRegistrationRequest(challenge: Data, name: String, userID: Data)
        -> ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest
    { ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest() }
    open func createCredentialAssertionRequest(challenge: Data) -> ASAuthorizationPlatformPublicKeyCredentialAssertionRequest {
        ASAuthorizationPlatformPublicKeyCredentialAssertionRequest()
    }
}

open class ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest: ASAuthorizationRequest {
    open var relyingPartyIdentifier = ""
    open var challenge = Data()
    open var name = ""
    open var displayName: String?
    open var userID = Data()
    open var userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference.preferred
    open var attestationPreference = ASAuthorizationPublicKeyCredentialAttestationKind.none
    @available(iOS 17.4, macOS 14.4, visionOS 1.1, *)
    open var excludedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor] {
        get { [] }
        set {}
    }
}

open class ASAuthorizationPlatformPublicKeyCredentialAssertionRequest: ASAuthorizationRequest {
    open var relyingPartyIdentifier = ""
    open var challenge = Data()
    open var allowedCredentials: [ASAuthorizationPlatformPublicKeyCredentialDescriptor] = []
    open var userVerificationPreference = ASAuthorizationPublicKeyCredentialUserVerificationPreference.preferred
}

// The WebAuthn PRF extension (iOS 18, macOS 15, visionOS 2).

@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
public struct ASAuthorizationPublicKeyCredentialPRFAssertionInput: Sendable {
    public struct InputValues: Sendable {
        public var saltInput1: Data
        public var saltInput2: Data?
        public init(saltInput1: Data, saltInput2: Data? = nil) {
            self.saltInput1 = saltInput1
            self.saltInput2 = saltInput2
        }
        public static func saltInput1(_ saltInput1: Data, saltInput2: Data? = nil) -> InputValues {
            InputValues(saltInput1: saltInput1, saltInput2: saltInput2)
        }
    }
    public let inputValues: InputValues?
    public let perCredentialInputValues: [Data: InputValues]?
    public static func inputValues(_ inputValues: InputValues, perCredentialInputValues: [Data: InputValues]? = nil) -> Self {
        Self(inputValues: inputValues, perCredentialInputValues: perCredentialInputValues)
    }
    public static func perCredentialInputValues(_ perCredentialInputValues: [Data: InputValues]) -> Self {
        Self(inputValues: nil, perCredentialInputValues: perCredentialInputValues)
    }
}

@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
public struct ASAuthorizationPublicKeyCredentialPRFRegistrationInput: Sendable {
    public typealias InputValues = ASAuthorizationPublicKeyCredentialPRFAssertionInput.InputValues
    public let shouldCheckForSupport: Bool
    public let inputValues: InputValues?
    public static var checkForSupport: Self { Self(shouldCheckForSupport: true, inputValues: nil) }
    public static func inputValues(_ inputValues: InputValues) -> Self { Self(shouldCheckForSupport: true, inputValues: inputValues) }
}

@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
public struct ASAuthorizationPublicKeyCredentialPRFRegistrationOutput: Sendable {
    public let isSupported: Bool
    public let first: SymmetricKey?
    public let second: SymmetricKey?
}

@available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
public struct ASAuthorizationPublicKeyCredentialPRFAssertionOutput: Sendable {
    public let first: SymmetricKey
    public let second: SymmetricKey?
}

extension ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest {
    @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
    public var prf: ASAuthorizationPublicKeyCredentialPRFRegistrationInput? {
        get { nil }
        set {}
    }
}

extension ASAuthorizationPlatformPublicKeyCredentialAssertionRequest {
    @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
    public var prf: ASAuthorizationPublicKeyCredentialPRFAssertionInput? {
        get { nil }
        set {}
    }
}

open class ASAuthorizationPlatformPublicKeyCredentialRegistration: NSObject, ASAuthorizationCredential {
    open var rawAttestationObject: Data? { nil }
    open var rawClientDataJSON: Data { Data() }
    open var credentialID: Data { Data() }
    @available(iOS 16.6, macOS 13.5, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
    @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
    open var prf: ASAuthorizationPublicKeyCredentialPRFRegistrationOutput? { nil }
}

open class ASAuthorizationPlatformPublicKeyCredentialAssertion: NSObject, ASAuthorizationCredential {
    open var rawAuthenticatorData: Data! { nil }
    open var signature: Data! { nil }
    open var userID: Data! { nil }
    open var rawClientDataJSON: Data { Data() }
    open var credentialID: Data { Data() }
    @available(iOS 16.6, macOS 13.5, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
    @available(iOS 18.0, macOS 15.0, visionOS 2.0, *)
    open var prf: ASAuthorizationPublicKeyCredentialPRFAssertionOutput? { nil }
}

open class ASAuthorization: NSObject {
    open var provider: any ASAuthorizationProvider { ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: "") }
    open var credential: any ASAuthorizationCredential { ASAuthorizationPlatformPublicKeyCredentialAssertion() }
}

public protocol ASAuthorizationControllerDelegate: NSObjectProtocol {
    func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
    func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error)
}

public protocol ASAuthorizationControllerPresentationContextProviding: NSObjectProtocol {
    func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor
}

open class ASAuthorizationController: NSObject {
    public struct RequestOptions: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let preferImmediatelyAvailableCredentials = RequestOptions(rawValue: 1)
    }
    open var authorizationRequests: [ASAuthorizationRequest]
    open weak var delegate: (any ASAuthorizationControllerDelegate)?
    open weak var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
    public init(authorizationRequests: [ASAuthorizationRequest]) { self.authorizationRequests = authorizationRequests }
    open func performRequests() {}
    @available(iOS 16.0, macOS 13.0, *)
    open func performRequests(options: RequestOptions) {}
    @available(iOS 16.0, *)
    open func performAutoFillAssistedRequests() {}
    @available(iOS 16.0, macOS 13.0, *)
    open func cancel() {}
}

/// `NS_ERROR_ENUM(ASAuthorizationErrorDomain)`: a struct with a nested `Code`.
public struct ASAuthorizationError: Error, Sendable {
    public enum Code: Int, Sendable {
        case unknown = 1000
        case canceled = 1001
        case invalidResponse = 1002
        case notHandled = 1003
        case failed = 1004
        case notInteractive = 1005
    }
    public let code: Code
    public init(_ code: Code) { self.code = code }
}
