// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "passkeyd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        .library(name: "WebAuthnTesting", targets: ["WebAuthnTesting"]),
        .executable(name: "passkeyd", targets: ["passkeyd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // The pure protocol library: bytes in, verdicts out.
        .target(
            name: "WebAuthn",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // Software authenticator and fixture builders for tests, the CLI client and load tests.
        .target(
            name: "WebAuthnTesting",
            dependencies: [
                "WebAuthn",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .executableTarget(
            name: "passkeyd",
            dependencies: [
                "WebAuthn",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        .executableTarget(
            name: "WebAuthnBenchmarks",
            dependencies: [
                "WebAuthn", "WebAuthnTesting",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Benchmarks/WebAuthnBenchmarks"
        ),
        .testTarget(
            name: "WebAuthnTests",
            dependencies: [
                "WebAuthn", "WebAuthnTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
    ]
)
