// swift-tools-version:6.1
import PackageDescription

// Warnings are errors in CI (SALVO_WERROR=1). The flag is kept out of ordinary builds so that a newer
// compiler's new warning never stops a user from building a release.
let strictness: [SwiftSetting] =
    Context.environment["SALVO_WERROR"] == "1" ? [.unsafeFlags(["-warnings-as-errors"])] : []

let package = Package(
    name: "Salvo",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "salvo", targets: ["salvo"]),
        .library(name: "APNSWire", targets: ["APNSWire"]),
        .library(name: "SalvoEngine", targets: ["SalvoEngine"]),
        .library(name: "SalvoSimulator", targets: ["SalvoSimulator"]),
        .library(name: "SalvoHTTP2", targets: ["SalvoHTTP2"]),
        .library(name: "SalvoSend", targets: ["SalvoSend"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        // C libraries, each reachable from exactly one Swift module (see README, "Module map").
        .systemLibrary(
            name: "CLiburing",
            pkgConfig: "liburing",
            providers: [.apt(["liburing-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // The protocols as values and bytes: no I/O.
        .target(
            name: "APNSWire",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictness
        ),

        // Sockets, the io_uring ring, TLS sessions over buffers, and the plain-socket fallback.
        .target(
            name: "SalvoIO",
            dependencies: [
                "CLiburing",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),

        // Bulk sending: token files, shards, batching, the sent window and rewind, reports.
        .target(
            name: "SalvoEngine",
            dependencies: [
                "APNSWire",
                "SalvoIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictness
        ),

        // The APNs gateway, feedback service, fault plans, ledger and dev certificates. Never imports the
        // sender's modules, so two independent stacks meet in every test.
        .target(
            name: "SalvoSimulator",
            dependencies: [
                "APNSWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictness
        ),

        // The HTTP/2 provider API client: connection pool, JWT signer and refresh, responses into a job report.
        .target(
            name: "SalvoHTTP2",
            dependencies: [
                "APNSWire",
                "SalvoEngine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictness
        ),

        // A bulk send over either interface, from token files to written results: the one entry point the
        // command line calls.
        .target(
            name: "SalvoSend",
            dependencies: ["APNSWire", "SalvoEngine", "SalvoHTTP2"],
            swiftSettings: strictness
        ),

        .executableTarget(
            name: "salvo",
            dependencies: [
                "APNSWire",
                "SalvoSend",
                "SalvoEngine",
                "SalvoIO",
                "SalvoSimulator",
                "SalvoHTTP2",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),

        .testTarget(
            name: "APNSWireTests",
            dependencies: ["APNSWire", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoEngineTests",
            dependencies: ["SalvoEngine", "APNSWire", "SalvoIO", "SalvoSimulator"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoHTTP2Tests",
            dependencies: [
                "SalvoHTTP2",
                "SalvoEngine",
                "APNSWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                "SalvoSimulator",
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoSendTests",
            dependencies: ["SalvoSend", "SalvoEngine", "SalvoHTTP2", "APNSWire", "SalvoSimulator"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoIOTests",
            dependencies: ["SalvoIO", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoSimulatorTests",
            dependencies: [
                "SalvoSimulator",
                "APNSWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),
    ]
)
