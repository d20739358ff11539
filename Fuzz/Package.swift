// swift-tools-version:6.1
// libFuzzer targets for the WebAuthn core. Kept out of the main package because they export
// LLVMFuzzerTestOneInput and only link with -sanitize=fuzzer. Run them with ../scripts/fuzz.
import PackageDescription

let package = Package(
    name: "passkeyd-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .executableTarget(name: "FuzzCBOR", dependencies: [.product(name: "WebAuthn", package: "passkeyd")]),
        .executableTarget(name: "FuzzAttestationObject", dependencies: [.product(name: "WebAuthn", package: "passkeyd")]),
    ]
)
