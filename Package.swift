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
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
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

        // Bulk TLS throughput of both transports against a local sink (release builds only).
        .executableTarget(
            name: "salvo-iobench",
            dependencies: ["SalvoIO"],
            swiftSettings: strictness
        ),

        .executableTarget(
            name: "salvo",
            dependencies: [
                "APNSWire",
                "SalvoEngine",
                "SalvoIO",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
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
            dependencies: ["SalvoEngine", "APNSWire"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoIOTests",
            dependencies: ["SalvoIO", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictness
        ),
    ]
)
