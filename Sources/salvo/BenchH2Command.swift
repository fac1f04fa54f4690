import APNSWire
import ArgumentParser
import Crypto
import Foundation
import NIOSSL
import SalvoBenchmarkSupport
import SalvoEngine
import SalvoHTTP2
import SalvoSimulator
import SalvoTestSupport

extension BenchCommand {
    /// `salvo bench h2`: notifications/s of the HTTP/2 client to an always-200 HTTP/2 server on loopback, over TLS,
    /// one row per connection count.
    struct H2: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "h2",
            abstract: "HTTP/2 client notifications/s to a local always-200 server (100-byte payload, TLS, ALPN h2)."
        )

        @Option(help: "Tokens per run.")
        var tokens: Int = 500_000

        @Option(parsing: .upToNextOption, help: "Connection counts to measure.")
        var connections: [Int] = [1, 2, 4]

        @Option(help: "Event-loop threads of the server.")
        var serverThreads: Int = 1

        @Option(help: "Streams per connection.")
        var streams: Int = 100

        @Option(help: "Runs per row; the best is reported.")
        var runs: Int = 2

        @Option(
            help:
                "The server: sink (always 200, frame headers only), nio (always 200, NIOHTTP2), or simulator (the simulator's HTTP/2 endpoint with token auth, checked against its ledger)."
        )
        var server: String = "sink"

        func validate() throws {
            guard (1...50_000_000).contains(self.tokens) else {
                throw ValidationError("--tokens is 1 to 50000000 (got \(self.tokens))")
            }
            guard self.connections.allSatisfy({ (1...64).contains($0) }) else {
                throw ValidationError("--connections are 1 to 64")
            }
            guard (1...20).contains(self.runs), (1...16).contains(self.serverThreads),
                (1...10_000).contains(self.streams)
            else {
                throw ValidationError("--runs is 1 to 20, --server-threads 1 to 16, --streams 1 to 10000")
            }
            guard HTTP2Benchmark.Server(rawValue: self.server) != nil || self.server == "simulator" else {
                throw ValidationError("--server is sink, nio or simulator (got \(self.server))")
            }
        }

        func run() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-bench-h2-\(getpid())")
                .path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let tokenFile = folder + "/tokens.csv"
            var generator = TokenGenerator(seed: 0x4832)
            let handle = try createFile(tokenFile)
            var chunk = "token\n"
            for _ in 0..<self.tokens {
                chunk += generator.next().hexString + "\n"
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
            print(
                "\(self.tokens) notifications, \(payloadBytes)-byte payload, \(self.server) server, "
                    + "\(self.streams) streams per connection, best of \(self.runs) run(s)"
            )
            print("connections  notifications/s  seconds  server")
            var failed = false
            for connections in self.connections {
                var best: HTTP2Benchmark.Row?
                var allDelivered = true
                for _ in 0..<self.runs {
                    let row =
                        self.server == "simulator"
                        ? try await self.simulatorRun(
                            tokenFile: tokenFile,
                            connections: connections,
                            certificates: certificates,
                            trustRoots: identity.trustRoots
                        )
                        : try await HTTP2Benchmark.run(
                            tokenFile: tokenFile,
                            connections: connections,
                            identity: identity,
                            serverThreads: self.serverThreads,
                            streams: self.streams,
                            server: HTTP2Benchmark.Server(rawValue: self.server)!
                        )
                    allDelivered = allDelivered && row.allDelivered
                    if best == nil || row.rate > best!.rate { best = row }
                }
                failed = failed || !allDelivered
                let row = best!
                print(
                    "\(String(connections).padding(toLength: 11, withPad: " ", startingAt: 0))  "
                        + "\(String(Int(row.rate)).padding(toLength: 15, withPad: " ", startingAt: 0))  "
                        + "\(String(format3(row.seconds)).padding(toLength: 7, withPad: " ", startingAt: 0))  "
                        + (allDelivered ? "every row answered once" : "MISMATCH")
                )
            }
            if failed { throw ExitCode(1) }
        }

        /// One run against the simulator's HTTP/2 endpoint, with token authentication; delivered means the
        /// simulator's ledger holds every token exactly once.
        private func simulatorRun(
            tokenFile: String,
            connections: Int,
            certificates: CertificateFactory,
            trustRoots: NIOSSLTrustRoots
        ) async throws -> HTTP2Benchmark.Row {
            let key = P256.Signing.PrivateKey()
            var configuration = SimulatorConfiguration(tls: .init(certificates))
            configuration.threads = self.serverThreads
            configuration.maximumTokens = self.tokens + self.tokens / 4 + 1024
            configuration.expectedTokens = self.tokens
            configuration.http2 = HTTP2EndpointConfiguration(
                providerKeys: [DevelopmentSigningKey.providerKey(for: key, keyID: "BENCHKEY01", teamID: "BENCHTEAM1")]
            )
            configuration.http2?.maximumConcurrentStreams = self.streams
            let simulator = try await Simulator.start(configuration)
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
                    streams: self.streams
                )
                let ledger = simulator.ledger.snapshot()
                row.allDelivered =
                    row.allDelivered && ledger.accepted == self.tokens && ledger.tokensAcceptedMoreThanOnce == 0
                try await simulator.shutdown()
                return row
            } catch {
                try? await simulator.shutdown()
                throw error
            }
        }
    }
}
