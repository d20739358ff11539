// swift-tools-version:6.1
// libFuzzer targets for the WebAuthn core. Kept out of the main package because they export
// LLVMFuzzerTestOneInput and only link with -sanitize=fuzzer. Run them with ../scripts/fuzz.
import Foundation
import PackageDescription

// A path dependency's identity is its folder name, which differs between clones.
let core = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent.lowercased()

let package = Package(
    name: "passkeyd-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(name: "FuzzCBOR", dependencies: [.product(name: "WebAuthn", package: core)]),
        .executableTarget(name: "FuzzAttestationObject", dependencies: [.product(name: "WebAuthn", package: core)]),
        .executableTarget(name: "FuzzClientExtensionResults", dependencies: [.product(name: "WebAuthn", package: core)]),
        .executableTarget(name: "FuzzAuthenticatorExtensions", dependencies: [.product(name: "WebAuthn", package: core)]),
    ]
)
