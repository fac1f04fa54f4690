// swift-tools-version:6.1
import PackageDescription

// libFuzzer targets for Salvo's decoders, a package of its own so that ordinary builds never compile them. Each
// target's `main.swift` hands its `LLVMFuzzerTestOneInput` to libFuzzer's driver (`CLibFuzzer`). Build and run them
// with `Fuzz/run.sh`, which passes `-sanitize=fuzzer,address`; without it the targets do not link. Like
// `Benchmarks/`, the package reaches only the main package's products.

let package = Package(
    name: "SalvoFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Salvo", path: "../"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ],
    targets: [
        // The declaration of libFuzzer's driver, which Swift cannot declare itself.
        .target(name: "CLibFuzzer", path: "Targets/CLibFuzzer"),
        // The binary gateway's frame decoder (commands 0, 1 and 2).
        .executableTarget(
            name: "FuzzFrameDecoder",
            dependencies: [
                "CLibFuzzer",
                .product(name: "APNSWire", package: "Salvo"), .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Targets/FuzzFrameDecoder",
        ),
        // The sender's readers of the gateway's answers: error responses and feedback tuples.
        .executableTarget(
            name: "FuzzGatewayAnswers",
            dependencies: [
                "CLibFuzzer",
                .product(name: "APNSWire", package: "Salvo"), .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Targets/FuzzGatewayAnswers",
        ),
        // The strict JSON scanner and the payload checks.
        .executableTarget(
            name: "FuzzPayload",
            dependencies: ["CLibFuzzer", .product(name: "APNSWire", package: "Salvo")],
            path: "Targets/FuzzPayload",
        ),
        // The CSV reader and the token parsers, through `TokenSource` (the reader is internal to SalvoRows).
        .executableTarget(
            name: "FuzzTokenFile",
            dependencies: [
                "CLibFuzzer",
                .product(name: "APNSWire", package: "Salvo"), .product(name: "SalvoRows", package: "Salvo"),
                .product(name: "SalvoBinary", package: "Salvo"),
            ],
            path: "Targets/FuzzTokenFile",
        ),
        // The simulator's HTTP/2 framing (`HTTP2FrameReader`) with NIOHPACK decoding each header block.
        .executableTarget(
            name: "FuzzHTTP2Frames",
            dependencies: [
                "CLibFuzzer",
                .product(name: "APNSWire", package: "Salvo"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Targets/FuzzHTTP2Frames",
        ),
        // The HTTP/2 client's reading of a server's bytes: `HTTP2FrameReader(fromServer: true)` and the wire engine's
        // `HTTP2AnswerDecoder` (HPACK, the answer's fields).
        .executableTarget(
            name: "FuzzHTTP2Answers",
            dependencies: [
                "CLibFuzzer",
                .product(name: "APNSWire", package: "Salvo"), .product(name: "SalvoHTTP2", package: "Salvo"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Targets/FuzzHTTP2Answers",
        ),
        // The simulator's provider-token verifier.
        .executableTarget(
            name: "FuzzProviderToken",
            dependencies: [
                "CLibFuzzer",
                .product(name: "SalvoSimulator", package: "Salvo"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Targets/FuzzProviderToken",
        ),
    ]
)
