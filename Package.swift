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
        .library(name: "SalvoRows", targets: ["SalvoRows"]),
        .library(name: "SalvoBinary", targets: ["SalvoBinary"]),
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
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
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

        // A device token's hex digits decoded sixteen at a time (SSE2), for the per-row path of a token file.
        .target(name: "CSalvoHex"),

        // The protocols as values and bytes: no I/O.
        .target(
            name: "APNSWire",
            dependencies: ["CSalvoHex", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strictness
        ),

        // Proxies as values: the proxy URL, the environment's proxy variables (curl's rules), and the exchange that
        // opens a tunnel (HTTP CONNECT, SOCKS5 with RFC 1929): no socket, no I/O. Both interfaces drive the same
        // exchange, the HTTP/2 side from a channel handler, the binary side on its raw socket before TLS.
        .target(name: "SalvoProxy", swiftSettings: strictness),

        // Sockets, the io_uring ring, TLS sessions over buffers, and the plain-socket fallback. Reads no environment
        // variable: the caller passes the transport, or the probe chooses.
        .target(
            name: "SalvoIO",
            dependencies: [
                "CLiburing",
                "COpenSSL",
                "SalvoProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),

        // Rows, shared by both interfaces: token files read once (CSV, tokens, payload columns), the row journal and
        // its checkpoints, outcomes per row, reports, partitions, the unsettled file, progress and metrics of a job.
        .target(
            name: "SalvoRows",
            dependencies: [
                "APNSWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The binary interface: the connection machine, shards over Dispatch queues, the sent window and rewind,
        // the gateway handshake and credentials, and the feedback client. The only sender module that links
        // OpenSSL and liburing (through SalvoIO).
        .target(
            name: "SalvoBinary",
            dependencies: [
                "APNSWire",
                "SalvoProxy",
                "SalvoIO",
                "SalvoRows",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The APNs gateway, feedback service, HTTP/2 endpoint, fault plans, ledger and verdict. Serves the
        // certificates it is given (it makes none). Never imports the sender's modules, so two independent
        // stacks meet in every test.
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
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictness
        ),

        // The HTTP/2 provider API client: connection pool, JWT signer and refresh, responses into a job report.
        // Holds no server: test and benchmark servers are in SalvoTestSupport and SalvoBenchmarkSupport.
        .target(
            name: "SalvoHTTP2",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoProxy",
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
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // A bulk send over either interface, from token files to written results: the one entry point the
        // command line calls.
        .target(
            name: "SalvoSend",
            dependencies: [
                "APNSWire",
                "SalvoProxy",
                "SalvoRows",
                "SalvoBinary",
                "SalvoHTTP2",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),

        // Live Activity broadcast channels: the channel management client (create, read, delete, list, resumable
        // creation with its journal and inventory) and the broadcast job over one HTTP/2 connection.
        .target(
            name: "SalvoBroadcast",
            dependencies: [
                "APNSWire",
                "SalvoProxy",
                "SalvoRows",
                "SalvoHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: strictness
        ),

        // What `demo`, `simulate` and `soak` need to run a simulator on this machine (not a product): the one maker
        // of development certificates (CA, server, clients with Apple's extensions, an expired client, a client of
        // another CA, encrypted keys, PKCS#12), the development ES256 signing key, and the reconciliation of a
        // sender's report with the simulator's verdict.
        .target(
            name: "SalvoDevelopment",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoBinary",
                "SalvoSimulator",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strictness
        ),

        // The console of both executables (not a product): errors as `Error: …` with the documented exit codes,
        // and the live progress line.
        .target(
            name: "SalvoConsole",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoHTTP2",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),

        // Scaffolding, not product (no library product contains it): the servers tests and benchmarks run on
        // 127.0.0.1 (the TLS listener over SalvoIO, the scriptable loopback HTTP/2 server, hostile and misbehaving
        // servers, a throwaway PostgreSQL), the certificates and simulator configurations they share, SHA-256 over
        // streams, child processes and scratch folders. Used by the tests, SalvoBenchmarkSupport and `salvo-bench`.
        .target(
            name: "SalvoTestSupport",
            dependencies: [
                "APNSWire",
                "SalvoIO",
                "SalvoRows",
                "SalvoBinary",
                "SalvoHTTP2",
                "SalvoSimulator",
                "SalvoDevelopment",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strictness
        ),

        // The service's core, with no HTTP in it (`salvo serve` is a shell around it): notifications taken in
        // batches and checked as values, kept in a store (the interface; SQLite through GRDB for one node),
        // fed to the same HTTP/2 job `salvo send` runs, their answers written back, idempotency keys and API keys.
        .target(
            name: "SalvoService",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoHTTP2",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictness
        ),

        // Campaigns through the service: each a `send --journal` job (SalvoSend's BulkSend) over the service's
        // gateway, scheduled, paused, resumed and cancelled by a pure state machine, recorded in the service's store.
        .target(
            name: "SalvoCampaigns",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoHTTP2",
                "SalvoSend",
                "SalvoService",
                "SalvoPostgres",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The service's webhooks: a delivery loop per receiver over the store's outbox, batches signed with
        // HMAC-SHA256, retried with backoff and jitter (the decisions as values), posted with AsyncHTTPClient.
        .target(
            name: "SalvoWebhooks",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoService",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The service's HTTP API on Hummingbird 2: routes checked against the OpenAPI document (`data/openapi`),
        // bearer API keys, problem details, health, readiness and metrics. Holds no decision of its own.
        .target(
            name: "SalvoServer",
            dependencies: [
                "APNSWire",
                "SalvoService",
                "SalvoCampaigns",
                "SalvoWebhooks",
                "SalvoCharts",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // Benchmark drivers and sinks behind `salvo bench` (not a product): the TLS transport benchmark, the
        // HTTP/2 client benchmark and its always-200 sink, the gateway blast that loads the simulator, and the
        // service's queue through its store alone (embedded or PostgreSQL, with the server's CPU and log).
        .target(
            name: "SalvoBenchmarkSupport",
            dependencies: [
                "APNSWire",
                "SalvoIO",
                "SalvoRows",
                "SalvoBinary",
                "SalvoHTTP2",
                "SalvoTestSupport",
                "SalvoService",
                "SalvoServiceStores",
                "SalvoPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictness
        ),

        // What a person or an operator watches, for the command line (not a product): the Prometheus endpoint
        // (`GET /metrics`) and the simulator's control endpoint on one small NIOHTTP1 server, JSON log lines, and
        // samples of the process (memory, descriptors, threads).
        .target(
            name: "SalvoObservability",
            dependencies: [
                "SalvoSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The shipped sample data as package resources (token sample, payloads, fault plans), so that `salvo demo`
        // and `salvo soak` run from any folder. The files live in `data/`; `Resources` links to it.
        .target(
            name: "SalvoData",
            exclude: ["Resources/vectors", "Resources/fuzz-seeds"],
            resources: [
                .copy("Resources/tokens"), .copy("Resources/payloads"), .copy("Resources/faults"),
                .copy("Resources/openapi"),
            ],
            swiftSettings: strictness
        ),

        // Charts as inline SVG and text escaped for HTML, drawn from numbers alone (no I/O): the soak's page and the
        // service's console draw with it.
        .target(name: "SalvoCharts", swiftSettings: strictness),

        // Soak runs (not a product): rounds of bulk sends against the embedded simulator, each checked against the
        // ledger, with samples of the process between rounds, the rules that fail a soak, and its HTML chart.
        .target(
            name: "SalvoSoak",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoBinary",
                "SalvoHTTP2",
                "SalvoSend",
                "SalvoBroadcast",
                "SalvoSimulator",
                "SalvoDevelopment",
                "SalvoObservability",
                "SalvoCharts",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictness
        ),

        // Tokens from a PostgreSQL query: the server's location and credentials (never shown), and the query's rows
        // streamed into a CSV spool that a job reads as any token file.
        .target(
            name: "SalvoPostgres",
            dependencies: [
                "SalvoRows",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The service's stores besides the embedded one: PostgreSQL for a fleet of `salvo serve` processes on one
        // database (cycles as batched statements, claims under leases with fencing, versioned migrations), and the
        // choice of store that `--store` makes. Kept apart so that SalvoService never links PostgresNIO.
        .target(
            name: "SalvoServiceStores",
            dependencies: [
                "APNSWire",
                "SalvoRows",
                "SalvoService",
                "SalvoPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),

        // The command line. An executable may use the non-product scaffolding: `demo` and `simulate` take their
        // development certificates from SalvoDevelopment.
        .executableTarget(
            name: "salvo",
            dependencies: [
                "APNSWire",
                "SalvoSend",
                "SalvoPostgres",
                "SalvoRows",
                "SalvoBinary",
                "SalvoIO",
                "SalvoSimulator",
                "SalvoHTTP2",
                "SalvoDevelopment",
                "SalvoConsole",
                "SalvoObservability",
                "SalvoData",
                "SalvoSoak",
                "SalvoBroadcast",
                "SalvoProxy",
                "SalvoService",
                "SalvoServiceStores",
                "SalvoServer",
                "SalvoCampaigns",
                "SalvoWebhooks",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),

        // The benchmark drivers' command line (`swift run -c release salvo-bench
        // send|h2|transport|gateway|wire|queue`): scaffolding kept out of the `salvo` product.
        .executableTarget(
            name: "salvo-bench",
            dependencies: [
                "APNSWire",
                "SalvoSend",
                "SalvoService",
                "SalvoServiceStores",
                "SalvoRows",
                "SalvoBinary",
                "SalvoIO",
                "SalvoSimulator",
                "SalvoHTTP2",
                "SalvoTestSupport",
                "SalvoBenchmarkSupport",
                "SalvoConsole",
                "SalvoData",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),

        // Test scaffolding that needs Swift Testing (so it cannot live in SalvoTestSupport, which the executable
        // links): traits shared by the test targets.
        // Test processes only: with SALVO_TEST_ONE_POOL_THREAD=1, every job of Swift's global executor runs on one
        // thread (Linux's libdispatch has no switch for it), so that work blocking the cooperative pool is found.
        .target(name: "CPoolHold", path: "Tests/CPoolHold"),
        .target(
            name: "SalvoTestTraits",
            dependencies: ["CPoolHold"],
            path: "Tests/SalvoTestTraits",
            swiftSettings: strictness
        ),
        .testTarget(
            name: "APNSWireTests",
            dependencies: [
                "SalvoTestTraits", "APNSWire", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoProxyTests",
            dependencies: ["SalvoTestTraits", "SalvoProxy"],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoRowsTests",
            dependencies: [
                "SalvoTestTraits", "SalvoRows", "APNSWire", "SalvoTestSupport",
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoBinaryTests",
            dependencies: [
                "SalvoTestTraits",
                "SalvoRows", "SalvoBinary", "APNSWire", "SalvoIO", "SalvoSimulator", "SalvoTestSupport", "SalvoProxy",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoHTTP2Tests",
            dependencies: [
                "SalvoHTTP2",
                "SalvoProxy",
                "SalvoRows",
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
                "SalvoTestSupport",
                "SalvoTestTraits",
                "SalvoBenchmarkSupport",
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoPostgresTests",
            dependencies: [
                "SalvoPostgres", "SalvoSend", "SalvoRows", "SalvoBinary", "SalvoHTTP2", "APNSWire", "SalvoSimulator",
                "SalvoTestSupport", "SalvoTestTraits",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoServiceTests",
            dependencies: [
                "APNSWire", "SalvoRows", "SalvoHTTP2", "SalvoService", "SalvoServiceStores", "SalvoPostgres",
                "SalvoServer", "SalvoSimulator", "SalvoDevelopment", "SalvoTestSupport", "SalvoTestTraits",
                "SalvoCharts", "SalvoBenchmarkSupport",
                // A store of the schema before, written as that version did, for the move to today's layout.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoCampaignsTests",
            dependencies: [
                "APNSWire", "SalvoRows", "SalvoHTTP2", "SalvoSend", "SalvoService", "SalvoServer", "SalvoCampaigns",
                "SalvoWebhooks", "SalvoSimulator", "SalvoDevelopment", "SalvoTestSupport", "SalvoTestTraits",
                "SalvoServiceStores", "SalvoPostgres",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoWebhooksTests",
            dependencies: [
                "APNSWire", "SalvoRows", "SalvoService", "SalvoWebhooks", "SalvoTestSupport", "SalvoTestTraits",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoSendTests",
            dependencies: [
                "SalvoSend", "SalvoRows", "SalvoBinary", "SalvoHTTP2", "SalvoIO", "APNSWire", "SalvoSimulator",
                "SalvoTestSupport",
                "SalvoTestTraits",
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoObservabilityTests",
            dependencies: [
                "SalvoObservability", "SalvoRows", "SalvoBinary", "SalvoSend", "SalvoSimulator", "SalvoTestSupport",
                "APNSWire",
                "SalvoHTTP2", .product(name: "NIOSSL", package: "swift-nio-ssl"),
                "SalvoTestTraits",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoSoakTests",
            dependencies: [
                "SalvoSoak", "SalvoSimulator", "SalvoRows", "SalvoBinary", "SalvoData", "SalvoTestSupport",
                "SalvoObservability",
                "SalvoTestTraits",
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoIOTests",
            dependencies: [
                "SalvoIO", "SalvoTestSupport", "SalvoTestTraits", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoTestSupportTests",
            dependencies: [
                "SalvoTestTraits",
                "SalvoTestSupport",
                "SalvoSimulator",
                "SalvoRows",
                "SalvoBinary",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoBroadcastTests",
            dependencies: [
                "SalvoBroadcast", "SalvoRows", "SalvoHTTP2", "APNSWire", "SalvoSimulator", "SalvoTestSupport",
                "SalvoTestTraits", "SalvoProxy",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictness
        ),
        .testTarget(
            name: "SalvoSimulatorTests",
            dependencies: [
                "SalvoSimulator",
                "APNSWire",
                "SalvoTestSupport",
                "SalvoTestTraits",
                "SalvoBenchmarkSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
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
