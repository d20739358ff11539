// A Linux stand-in for the part of Apple's AuthenticationServices that
// Sources/PasskeyClient/Apple/ApplePasskeyAuthenticator.swift uses, declared with the signatures of
// Apple's documentation (iOS 16–18 SDKs), so the Linux build type-checks the adapter. Nothing
// here runs: it is built only into the `PasskeyClientAppleCheck` target. Add a declaration only
// when the adapter starts using it, copied from Apple's documented signature.
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

open class ASAuthorizationPlatformPublicKeyCredentialRegistration: NSObject, ASAuthorizationCredential {
    open var rawAttestationObject: Data? { nil }
    open var rawClientDataJSON: Data { Data() }
    open var credentialID: Data { Data() }
    @available(iOS 16.6, macOS 13.5, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
}

open class ASAuthorizationPlatformPublicKeyCredentialAssertion: NSObject, ASAuthorizationCredential {
    open var rawAuthenticatorData: Data! { nil }
    open var signature: Data! { nil }
    open var userID: Data! { nil }
    open var rawClientDataJSON: Data { Data() }
    open var credentialID: Data { Data() }
    @available(iOS 16.6, macOS 13.5, *)
    open var attachment: ASAuthorizationPublicKeyCredentialAttachment { .platform }
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
