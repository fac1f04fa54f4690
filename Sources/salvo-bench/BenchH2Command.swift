import APNSWire
import ArgumentParser
import Crypto
import Foundation
import NIOPosix
import NIOSSL
import SalvoBenchmarkSupport
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoRows
import SalvoSimulator
import SalvoTestSupport

extension BenchCommand {
    /// `salvo-bench h2`: notifications/s of the HTTP/2 client to an always-200 HTTP/2 server on loopback, over TLS,
    /// one row per connection count; with `--latency-ms`, to the simulator held that far away, one row per round
    /// trip and connection choice, with the client's CPU time and the peak memory.
    struct H2: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "h2",
            abstract: "HTTP/2 client notifications/s to a local always-200 server (100-byte payload, TLS, ALPN h2)."
        )

        @Option(help: "Tokens per run.")
        var tokens: Int = 500_000

        @Option(
            parsing: .upToNextOption,
            help: "Connection counts to measure, or auto (default: 1 2 4; with --latency-ms: auto 1 4 16)."
        )
        var connections: [ConnectionCount] = []

        @Option(
            name: .customLong("latency-ms"),
            parsing: .upToNextOption,
            help: """
                One-way delays (ms) of the simulator to measure at (0 25 50 100: round trips of 0, 50, 100 and 200 \
                ms); implies --server simulator, whose endpoint announces 1,000 streams.
                """
        )
        var latencies: [Int] = []

        @Option(help: "HTTP/2 with auto: the most connections.")
        var maxConnections: Int = 32

        @Option(help: "Event-loop threads of the server.")
        var serverThreads: Int = 1

        @Option(help: "Streams per connection (default: 100; with --latency-ms, as many as the server allows).")
        var streams: Int?

        @Option(
            name: .customLong("h2-engine"),
            help: "The client's HTTP/2 engine: wire or nio (default: the client's)."
        )
        var engine: HTTP2Engine?

        @Option(help: "Runs per row; the best is reported.")
        var runs: Int = 2

        @Flag(
            help: """
                Also send every run's rows with a two-placeholder payload template (a payload per row, about the \
                fixed payload's size), and print template/fixed ratios of time, client CPU and peak memory.
                """
        )
        var template = false

        @Flag(
            help: """
                With --latency-ms: also run the Go reference client (Benchmarks/peer: Go's HTTP/2 transport, 5,000 \
                goroutines) against the same simulator at each round trip, timed from spawn to exit.
                """
        )
        var peer = false

        @OptionGroup var progressOptions: ProgressOptions

        @Option(
            help:
                "The server: sink (always 200, frame headers only), nio (always 200, NIOHTTP2), or simulator (the simulator's HTTP/2 endpoint with token auth, checked against its ledger)."
        )
        var server: String = "sink"

        func validate() throws {
            guard (1...50_000_000).contains(self.tokens) else {
                throw ValidationError("--tokens is 1 to 50000000 (got \(self.tokens))")
            }
            guard self.connections.allSatisfy({ $0 == .auto || $0.count.map { (1...64).contains($0) } == true }) else {
                throw ValidationError("--connections are 1 to 64 or auto")
            }
            guard self.latencies.allSatisfy({ (0...1000).contains($0) }), (1...256).contains(self.maxConnections) else {
                throw ValidationError("--latency-ms are 0 to 1000, --max-connections 1 to 256")
            }
            guard (1...20).contains(self.runs), (1...16).contains(self.serverThreads),
                (1...10_000).contains(self.streams ?? 100)
            else {
                throw ValidationError("--runs is 1 to 20, --server-threads 1 to 16, --streams 1 to 10000")
            }
            guard HTTP2Benchmark.Server(rawValue: self.server) != nil || self.server == "simulator" else {
                throw ValidationError("--server is sink, nio or simulator (got \(self.server))")
            }
            guard !self.template || self.latencies.isEmpty else {
                throw ValidationError("--template measures without --latency-ms")
            }
            guard !self.peer || !self.latencies.isEmpty else {
                throw ValidationError("--peer measures with --latency-ms")
            }
        }

        /// The connection choices to measure.
        private var choices: [ConnectionCount] {
            if !self.connections.isEmpty { return self.connections }
            return self.latencies.isEmpty
                ? [.fixed(1), .fixed(2), .fixed(4)] : [.auto, .fixed(1), .fixed(4), .fixed(16)]
        }

        func run() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-bench-h2-\(getpid())")
                .path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let tokenFile = folder + "/tokens.csv"
            var generator = TokenGenerator(seed: 0x4832)
            let handle = try createFile(tokenFile)
            // With --template, each row has the template's fields (a fixed payload's job reads only the token).
            var chunk =
                (["token"] + (self.template ? HTTP2Benchmark.templateColumns : [])).joined(separator: ",") + "\n"
            for index in 0..<self.tokens {
                chunk += generator.next().hexString
                chunk += self.template ? "," + HTTP2Benchmark.templateFields(row: index) + "\n" : "\n"
                if chunk.utf8.count >= 1 << 20 {
                    handle.write(Data(chunk.utf8))
                    chunk = ""
                }
            }
            handle.write(Data(chunk.utf8))
            try handle.close()

            let certificates = try CertificateFactory()
            let identity = HTTP2Benchmark.ServerIdentity(
                certificateChain: [try certificates.server.certificate],
                privateKey: try certificates.server.key,
                trustRoots: .certificates([try certificates.ca.certificate]),
                serverName: "localhost"
            )
            let payloadBytes = try Payload(json: HTTP2Benchmark.payloadJSON).byteCount
            // What every run against the simulator is checked against, read once.
            let expected =
                self.server == "simulator" || !self.latencies.isEmpty
                ? try ExpectedTokens.read(contentsOf: tokenFile) : nil
            if let expected, !self.latencies.isEmpty {
                return try await self.latencyTable(
                    tokenFile: tokenFile,
                    expected: expected,
                    certificates: certificates,
                    trustRoots: identity.trustRoots,
                    payloadBytes: payloadBytes
                )
            }
            print(
                "\(self.tokens) notifications, \(payloadBytes)-byte payload, \(self.server) server, "
                    + "\(self.streams ?? 100) streams per connection, \((self.engine ?? HTTP2ClientConfiguration.defaultEngine).rawValue) engine, "
                    + "best of \(self.runs) run(s)"
            )
            if self.template {
                print(
                    "client CPU: its event loop threads; process CPU (rows read and rendered included) and peak RSS: "
                        + "the whole process, the in-process server included"
                )
                print(
                    "connections  payload   notifications/s  seconds  client CPU s  process CPU s  peak RSS MiB  server"
                )
            } else {
                print("connections  notifications/s  seconds  server")
            }
            var failed = false
            for choice in self.choices {
                let connections = choice.count ?? min(Processors.online, self.maxConnections)
                let maximum = choice == .auto ? self.maxConnections : nil
                var measured: [HTTP2Benchmark.Row] = []
                for payloads in self.template ? [nil, try HTTP2Benchmark.templatePayloads()] : [nil] {
                    let (row, allDelivered) = try await self.best { () async throws -> HTTP2Benchmark.Row in
                        self.server == "simulator"
                            ? try await self.simulatorRun(
                                tokenFile: tokenFile,
                                expected: expected!,
                                connections: connections,
                                maximumConnections: maximum,
                                latencyMilliseconds: 0,
                                certificates: certificates,
                                trustRoots: identity.trustRoots,
                                payloads: payloads
                            )
                            : try await HTTP2Benchmark.run(
                                tokenFile: tokenFile,
                                connections: connections,
                                identity: identity,
                                serverThreads: self.serverThreads,
                                streams: self.streams ?? 100,
                                server: HTTP2Benchmark.Server(rawValue: self.server)!,
                                engine: self.engine,
                                payloads: payloads
                            )
                    }
                    failed = failed || !allDelivered
                    measured.append(row)
                    var columns: [(String, Int)] = [(Self.connectionsColumn(choice, row), 11)]
                    if self.template { columns.append((payloads == nil ? "fixed" : "template", 8)) }
                    columns += [(String(Int(row.rate)), 15), (format3(row.seconds), 7)]
                    if self.template {
                        columns += [
                            (format3(row.clientCPUSeconds), 12), (format3(row.processCPUSeconds), 13),
                            (String(Int(row.peakResidentMiB.rounded())), 12),
                        ]
                    }
                    print(
                        columns.map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(
                            separator: "  "
                        ) + "  " + (allDelivered ? "every row answered once" : "MISMATCH")
                    )
                }
                if measured.count == 2 {
                    let (fixed, templated) = (measured[0], measured[1])
                    func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.2f", a / b) : "-" }
                    print(
                        "             template/fixed: time \(ratio(templated.seconds, fixed.seconds))×, "
                            + "client CPU \(ratio(templated.clientCPUSeconds, fixed.clientCPUSeconds))×, "
                            + "process CPU \(ratio(templated.processCPUSeconds, fixed.processCPUSeconds))×, "
                            + "peak RSS \(ratio(templated.peakResidentMiB, fixed.peakResidentMiB))×"
                    )
                }
            }
            if failed { throw ExitCode(1) }
        }

        /// The fastest of `runs` runs, and whether every run answered every row once.
        private func best(
            _ run: () async throws -> HTTP2Benchmark.Row
        ) async throws -> (row: HTTP2Benchmark.Row, allDelivered: Bool) {
            var best: HTTP2Benchmark.Row?
            var allDelivered = true
            for _ in 0..<self.runs {
                let row = try await run()
                allDelivered = allDelivered && row.allDelivered
                if best == nil || row.rate > best!.rate { best = row }
            }
            return (best!, allDelivered)
        }

        /// The table by round trip: for each one-way delay, each connection choice, best of `runs`, against the
        /// simulator with token authentication; every run is checked against the simulator's ledger.
        private func latencyTable(
            tokenFile: String,
            expected: ExpectedTokens,
            certificates: CertificateFactory,
            trustRoots: NIOSSLTrustRoots,
            payloadBytes: Int
        ) async throws {
            print(
                "\(self.tokens) notifications, \(payloadBytes)-byte payload, simulator (token auth, "
                    + "\(self.serverThreads) thread(s), 1,000 streams announced) in this process on "
                    + "\(Processors.online) cores, \((self.engine ?? HTTP2ClientConfiguration.defaultEngine).rawValue) engine, "
                    + "best of \(self.runs) run(s); client CPU: its event loop threads; "
                    + "process CPU and peak RSS: client and simulator together"
            )
            print(
                "whole job: notifications ÷ the time from before the job starts to after it returns with every "
                    + "connection closed (a user's clock); steady: ÷ the time from the first connect to the last "
                    + "answer (the job's own rate, its end left out); end: the last answer to the return; start: the "
                    + "first TLS handshake to the last connection's first request"
            )
            if self.peer {
                print(
                    "go peer: Benchmarks/peer (Go's HTTP/2 transport, 5,000 goroutines) as a child process, whole job "
                        + "from spawn to exit; its CPU and peak RSS are its own"
                )
            }
            print(
                "round trip  connections  whole job/s  whole s  end ms  start ms  steady/s  measured RTT  "
                    + "client CPU s  process CPU s  peak RSS MiB  ledger"
            )
            var failed = false
            for latency in self.latencies {
                var salvoAuto: Double?
                for choice in self.choices {
                    var best: HTTP2Benchmark.Row?
                    var allDelivered = true
                    var refusedStreams = 0
                    for _ in 0..<self.runs {
                        let row = try await self.simulatorRun(
                            tokenFile: tokenFile,
                            expected: expected,
                            connections: choice.count ?? min(Processors.online, self.maxConnections),
                            maximumConnections: choice == .auto ? self.maxConnections : nil,
                            latencyMilliseconds: latency,
                            certificates: certificates,
                            trustRoots: trustRoots
                        )
                        allDelivered = allDelivered && row.allDelivered
                        refusedStreams += row.refusedStreams
                        if best == nil || row.wholeRate > best!.wholeRate { best = row }
                    }
                    failed = failed || !allDelivered
                    let row = best!
                    if choice == .auto { salvoAuto = row.wholeRate }
                    let start = row.lastFirstRequestSeconds.flatMap { last in
                        row.firstHandshakeSeconds.map { String(Int((1000 * (last - $0)).rounded())) }
                    }
                    let columns: [(String, Int)] = [
                        ("\(2 * latency) ms", 10),
                        (Self.connectionsColumn(choice, row), 11),
                        (String(Int(row.wholeRate)), 11),
                        (format3(row.wholeSeconds), 7),
                        (String(Int((1000 * row.closingSeconds).rounded())), 6),
                        (start ?? "-", 8),
                        (String(Int(row.rate)), 8),
                        (row.roundTripMilliseconds.map { "\(format3($0)) ms" } ?? "-", 12),
                        (format3(row.clientCPUSeconds), 12),
                        (format3(row.processCPUSeconds), 13),
                        (String(Int(row.peakResidentMiB.rounded())), 12),
                    ]
                    print(
                        columns.map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(
                            separator: "  "
                        )
                            + "  " + (allDelivered ? "every row once" : "MISMATCH")
                            + (refusedStreams > 0 ? ", \(refusedStreams) streams refused above the limit" : "")
                    )
                }
                if self.peer {
                    let (peerRow, delivered) = try await self.peerRuns(
                        tokenFile: tokenFile,
                        expected: expected,
                        certificates: certificates,
                        latencyMilliseconds: latency
                    )
                    failed = failed || !delivered
                    let columns: [(String, Int)] = [
                        ("\(2 * latency) ms", 10),
                        ("go: \(peerRow.connections)", 11),
                        (String(Int(peerRow.rate)), 11),
                        (format3(peerRow.wallSeconds), 7),
                        ("-", 6), ("-", 8), ("-", 8), ("-", 12), ("-", 12),
                        (format3(peerRow.cpuSeconds), 13),
                        (String(Int(peerRow.peakResidentMiB.rounded())), 12),
                    ]
                    let ratio = salvoAuto.map { peerRow.rate > 0 ? String(format: "%.2f", $0 / peerRow.rate) : "-" }
                    print(
                        columns.map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(
                            separator: "  "
                        ) + "  " + (delivered ? "every row once" : "MISMATCH")
                            + (ratio.map { "; salvo auto ÷ go: \($0)×" } ?? "")
                    )
                }
            }
            if failed { throw ExitCode(1) }
        }

        /// The Go reference against a simulator configured as Salvo's runs are, `runs` times: the run with the best
        /// whole-process rate, and whether every run delivered every token once (the simulator's ledger).
        private func peerRuns(
            tokenFile: String,
            expected: ExpectedTokens,
            certificates: CertificateFactory,
            latencyMilliseconds: Int
        ) async throws -> (H2Peer.Result, Bool) {
            let folder = (tokenFile as NSString).deletingLastPathComponent
            let authorities = folder + "/ca.pem"
            let payload = folder + "/payload.json"
            guard
                FileManager.default.createFile(
                    atPath: authorities,
                    contents: Data(certificates.ca.certificatePEM.utf8)
                ),
                FileManager.default.createFile(atPath: payload, contents: Data(HTTP2Benchmark.payloadJSON.utf8))
            else { throw UserError("\(folder): cannot write the peer's CA and payload files") }
            // Built once per machine, outside the measured runs.
            let executable = try await H2Peer.executable(
                buildFolder: FileManager.default.temporaryDirectory.appendingPathComponent("salvo-h2-peer-build").path
            )
            var best: H2Peer.Result?
            var allDelivered = true
            for _ in 0..<self.runs {
                let key = P256.Signing.PrivateKey()
                let simulator = try await Simulator.start(
                    self.simulatorConfiguration(key: key, certificates: certificates, latency: latencyMilliseconds)
                )
                do {
                    let signer = try JWTSigner(privateKey: key, keyID: "BENCHKEY01", teamID: "BENCHTEAM1")
                    var options = H2Peer.Options(
                        gateway: "127.0.0.1:\(simulator.http2Port!)",
                        serverName: "localhost",
                        certificateAuthorities: authorities,
                        tokenFile: tokenFile,
                        payloadFile: payload,
                        topic: "com.example.bench",
                        authentication: .providerToken(signer.token(issuedAt: Int64(Date().timeIntervalSince1970)))
                    )
                    options.timeLimitSeconds = 600
                    let result = try await H2Peer.run(options, executable: executable)
                    let verdict = simulator.verdict(expected: expected, listLimit: 0)
                    allDelivered =
                        allDelivered && result.ok == self.tokens && verdict.passed
                        && verdict.deliveredOnce == self.tokens
                    if best == nil || result.rate > best!.rate { best = result }
                    try await simulator.shutdown()
                } catch {
                    try? await simulator.shutdown()
                    throw error
                }
            }
            return (best!, allDelivered)
        }

        /// The simulator every run at a distance talks to: token authentication with `key`, the file's tokens
        /// expected, `latency` ms each way.
        private func simulatorConfiguration(
            key: P256.Signing.PrivateKey,
            certificates: CertificateFactory,
            latency: Int
        ) -> SimulatorConfiguration {
            var configuration = SimulatorConfiguration(tls: .init(certificates))
            configuration.threads = self.serverThreads
            configuration.maximumTokens = self.tokens + self.tokens / 4 + 1024
            configuration.expectedTokens = self.tokens
            configuration.plan.latencyMilliseconds = latency
            configuration.http2 = HTTP2EndpointConfiguration(
                providerKeys: [DevelopmentSigningKey.providerKey(for: key, keyID: "BENCHKEY01", teamID: "BENCHTEAM1")]
            )
            // At a distance the endpoint announces its default (1,000), as APNs does, and the client follows it.
            let streams = self.latencies.isEmpty ? self.streams ?? 100 : self.streams
            if let streams { configuration.http2?.maximumConcurrentStreams = streams }
            return configuration
        }

        /// `4`, or `auto: 6` with what auto chose.
        private static func connectionsColumn(_ choice: ConnectionCount, _ row: HTTP2Benchmark.Row) -> String {
            choice == .auto ? "auto: \(row.connectionsOpened)" : "\(row.connections)"
        }

        /// One run against the simulator's HTTP/2 endpoint, with token authentication; delivered means the
        /// simulator's verdict passes: every token of the file in its ledger exactly once, and nothing else.
        private func simulatorRun(
            tokenFile: String,
            expected: ExpectedTokens,
            connections: Int,
            maximumConnections: Int?,
            latencyMilliseconds: Int,
            certificates: CertificateFactory,
            trustRoots: NIOSSLTrustRoots,
            payloads: RowPayloads? = nil
        ) async throws -> HTTP2Benchmark.Row {
            let key = P256.Signing.PrivateKey()
            let configuration = self.simulatorConfiguration(
                key: key,
                certificates: certificates,
                latency: latencyMilliseconds
            )
            let streams = self.latencies.isEmpty ? self.streams ?? 100 : self.streams
            let simulator = try await Simulator.start(configuration)
            let display = ProgressDisplay(
                self.progressOptions.progress,
                quiet: false,
                prefix:
                    "\(latencyMilliseconds * 2) ms round trip, \(maximumConnections.map { "auto (≤ \($0))" } ?? "\(connections)") connection(s): "
            )
            do {
                let signer = try JWTSigner(privateKey: key, keyID: "BENCHKEY01", teamID: "BENCHTEAM1")
                var row = try await HTTP2Benchmark.measure(
                    tokenFile: tokenFile,
                    port: simulator.http2Port!,
                    serverName: "localhost",
                    trustRoots: trustRoots,
                    authentication: .token(try ProviderToken(signer: signer)),
                    topic: "com.example.bench",
                    connections: connections,
                    maximumConnections: maximumConnections,
                    streams: streams,
                    engine: self.engine,
                    payloads: payloads,
                    progress: display.callback
                )
                display.finish()
                let verdict = simulator.verdict(expected: expected, listLimit: 0)
                row.allDelivered = row.allDelivered && verdict.passed && verdict.deliveredOnce == self.tokens
                row.refusedStreams = verdict.ledger.refusedStreams
                try await simulator.shutdown()
                return row
            } catch {
                try? await simulator.shutdown()
                throw error
            }
        }
    }
}

extension ConnectionCount {
    /// The fixed count; nil for auto.
    var count: Int? {
        if case .fixed(let count) = self { return count }
        return nil
    }
}
