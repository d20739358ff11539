// swift-tools-version:6.1
import PackageDescription

var linuxOnlyTargets: [Target] = []
#if os(Linux)
    // Apple's AuthenticationServices and Security do not exist here: the Apple adapter of
    // PasskeyClient is type-checked against stand-ins declaring exactly the API it uses. Their
    // module names differ from Apple's on purpose: a module named `Security` in the build folder
    // would make `canImport(Security)` true for every other package (swift-certificates then
    // compiles its Apple-only code).
    linuxOnlyTargets = [
        .target(
            name: "AuthenticationServicesShim", dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/Shims/AuthenticationServices"),
        .target(name: "SecurityShim", path: "Tests/Shims/Security"),
        .target(
            name: "PasskeyClientAppleCheck",
            dependencies: [
                "PasskeyClient", "AuthenticationServicesShim", "SecurityShim", .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Sources/PasskeyClient/Apple",
            swiftSettings: [.define("PASSKEYCLIENT_APPLE_SHIM")]
        ),
        // The example app's model (no SwiftUI) against the real PasskeyClient API.
        .target(
            name: "PasskeysAppModelCheck",
            dependencies: ["PasskeyClient"],
            path: "Examples/PasskeysApp/PasskeysApp",
            exclude: ["PasskeysApp.swift", "ContentView.swift", "PasskeysApp.entitlements"],
            sources: ["AccountModel.swift"]
        ),
    ]
#endif

let package = Package(
    name: "passkeyd",
    platforms: [.macOS(.v15), .iOS(.v16), .visionOS(.v1)],
    products: [
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        .library(name: "WebAuthnTesting", targets: ["WebAuthnTesting"]),
        .library(name: "PasskeyStore", targets: ["PasskeyStore"]),
        .library(name: "PasskeyMail", targets: ["PasskeyMail"]),
        .library(name: "PasskeyCore", targets: ["PasskeyCore"]),
        .library(name: "PasskeyServer", targets: ["PasskeyServer"]),
        .library(name: "PasskeyClient", targets: ["PasskeyClient"]),
        .library(name: "PasskeyClientSoftware", targets: ["PasskeyClientSoftware"]),
        .executable(name: "passkeyd", targets: ["passkeyd"]),
        .executable(name: "passkey", targets: ["passkey"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        // Spans: the API in the libraries, the OTLP/HTTP exporter (protobuf) in the executable
        // only. The gRPC exporter's trait is left out (it would build gRPC for nothing).
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Settings: each settings struct reads itself from a ConfigReader (`init(reader:)`).
        // passkeyd's own providers read the environment and the file (see SettingsProviders.swift),
        // so the JSON trait (Foundation's parser behind JSONSnapshot) is not needed.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: []),
        // `swift package generate-documentation`: the DocC catalogs of WebAuthn and PasskeyClient.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
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
        // What is stored (accounts, passkeys, sessions, audit events…), the store's errors and
        // usernames: values the domain and the edge use without the store.
        .target(name: "PasskeyModels"),
        // What the store and the edge share at run time: spans, and the event-loop executor.
        .target(
            name: "PasskeyRuntime",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Storage: the PasskeyStore protocol, SQLite (embedded default) and PostgreSQL.
        .target(
            name: "PasskeyStore",
            dependencies: [
                "PasskeyModels", "PasskeyRuntime", "CSQLite", "CSQLiteSettings",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Fresh SQLite and PostgreSQL databases for the test suites.
        .target(
            name: "PasskeyStoreTesting",
            dependencies: [
                "PasskeyStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The domain: ceremonies, accounts, sessions, tokens, the OpenID provider's rules, the
        // webhook outbox, limits and metrics. No HTTP framework: it takes and returns values and
        // throws domain errors; the edge (PasskeyServer) maps them to HTTP.
        // Mail: addresses, RFC 5322 / MIME messages and a small SMTP client on swift-nio and
        // swift-nio-ssl (no SMTP package is on the mirror; issue 43).
        .target(
            name: "PasskeyMail",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "PasskeyCore",
            dependencies: [
                "WebAuthn", "PasskeyStore", "PasskeyMail",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        // The Hummingbird 2 edge: routes, middleware, request and response shapes, the one
        // mapping from domain errors to HTTP statuses, webhook sending, well-known files.
        .target(
            name: "PasskeyServer",
            dependencies: [
                "WebAuthn", "PasskeyModels", "PasskeyRuntime", "PasskeyCore", "PasskeyMail",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            // The API document, edited by hand, compiled into the binary.
            resources: [.embedInCode("Resources/openapi.json")]
        ),
        // The client library for apps: URLSession, Foundation and Crypto (CryptoKit on Apple
        // platforms: the PRF-derived SymmetricKey) only (no server, store or NIO).
        .target(
            name: "PasskeyClient",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            exclude: linuxOnlyTargets.isEmpty ? [] : ["Apple"],
            resources: [.embedInCode("Resources/messages.en.json"), .embedInCode("Resources/messages.fr.json")]
        ),
        // PasskeyClient's authenticator on Linux and in tests: the software authenticator.
        .target(name: "PasskeyClientSoftware", dependencies: ["PasskeyClient", "WebAuthn", "WebAuthnTesting"]),
        // glibc's allocator settings for the server process (malloc.h is not in Swift's Glibc).
        .target(name: "CAllocator"),
        // The system's SQLite, whose C API the store calls directly (`apt install libsqlite3-dev`).
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // SQLite's process-wide settings (sqlite3_config is variadic: Swift cannot call it).
        .target(name: "CSQLiteSettings", linkerSettings: [.linkedLibrary("sqlite3")]),
        // `passkeyd --version`: the version in VERSION and the commit, written before each build.
        .plugin(name: "BuildInfo", capability: .buildTool()),
        .executableTarget(
            name: "passkeyd",
            dependencies: [
                "WebAuthn", "PasskeyStore", "PasskeyCore", "PasskeyServer", "CAllocator",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // The Swift runtime and Foundation linked in, in every build: the binary runs without a
            // Swift toolchain (issue 45; `ldd` in deploy/tests). Compiled with -static-stdlib too:
            // the module's objects then name the static libraries Foundation needs (CoreFoundation,
            // ICU), in the order the linker wants them. SwiftPM does not recompile a target when
            // only these flags change: after editing them, touch Sources/passkeyd. SQLite, zlib and
            // libstdc++ come from the static archives scripts/prebuild links into
            // .build/static-libs, which the linker searches before the system's folders.
            swiftSettings: [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux]))],
            linkerSettings: [
                .unsafeFlags(["-static-stdlib", "-L\(Context.packageDirectory)/.build/static-libs"], .when(platforms: [.linux]))
            ],
            plugins: ["BuildInfo"]
        ),
        // A passkey in the terminal: a software passkey provider speaking the native API.
        .executableTarget(
            name: "passkey",
            dependencies: [
                "WebAuthn", "WebAuthnTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
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
            name: "PasskeyServerTests",
            dependencies: [
                "WebAuthn", "WebAuthnTesting", "PasskeyStore", "PasskeyStoreTesting", "PasskeyCore", "PasskeyServer", "PasskeyMail",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        // The domain without HTTP: services, password hashes, access tokens (no Hummingbird).
        .testTarget(
            name: "PasskeyCoreTests",
            dependencies: [
                "WebAuthn", "WebAuthnTesting", "PasskeyStore", "PasskeyStoreTesting", "PasskeyCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        // Everything that runs the built executables (`passkeyd`, `passkey`) as processes.
        .testTarget(
            name: "BinaryTests",
            dependencies: [
                "WebAuthn", "WebAuthnTesting", "PasskeyStore", "PasskeyStoreTesting", "PasskeyCore", "PasskeyServer", "PasskeyClient",
                "PasskeyClientSoftware",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "PasskeyStoreTests",
            dependencies: [
                "PasskeyStore", "PasskeyStoreTesting",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // The SMTP client against a real SMTP server (scripts/smtp_server.py), messages, addresses.
        .testTarget(
            name: "PasskeyMailTests",
            dependencies: [
                "PasskeyMail", "WebAuthnTesting",
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
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
    ] + linuxOnlyTargets
)
