import APNSWire
import ArgumentParser
import SalvoBenchmarkSupport
import SalvoConsole
import SalvoSimulator
import SalvoTestSupport

extension BenchCommand {
    /// `salvo-bench gateway`: the simulator's gateway on one event loop thread, blasted over TLS on
    /// loopback by `GatewayBlast` from a second thread; reports notifications validated per second.
    struct Gateway: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "The simulator's gateway: command 2 frames with a 100-byte payload over TLS, validated on one core."
        )

        @Option(help: "Notifications per measurement.")
        var notifications: Int = 5_000_000

        @Option(help: "Distinct device tokens among them (the ledger holds one record per token).")
        var tokens: Int = 1_000_000

        @Option(help: "Measurements; the best is reported.")
        var rounds: Int = 3

        func validate() throws {
            guard self.notifications > 0, self.notifications < Int(UInt32.max) else {
                throw ValidationError("--notifications must be between 1 and 4294967294 (got \(self.notifications))")
            }
            guard self.tokens > 0 else { throw ValidationError("--tokens must be positive (got \(self.tokens))") }
            guard self.rounds > 0, self.rounds <= 100 else {
                throw ValidationError("--rounds must be between 1 and 100 (got \(self.rounds))")
            }
        }

        func run() async throws {
            let payload = try Payload(
                json:
                    #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
            )
            let certificates = try CertificateFactory()
            let client = try certificates.client(topic: "com.example.app")
            var best = 0.0
            for round in 1...self.rounds {
                var configuration = SimulatorConfiguration(tls: .init(certificates))
                configuration.threads = 1
                configuration.maximumTokens = self.tokens
                configuration.expectedTokens = self.tokens
                let simulator = try await Simulator.start(configuration)
                let result: GatewayBlast.Result
                do {
                    result = try await GatewayBlast.run(
                        port: simulator.gatewayPort,
                        identity: client,
                        caPEM: certificates.ca.certificatePEM,
                        count: self.notifications,
                        distinctTokens: self.tokens,
                        payload: payload
                    )
                } catch {
                    try await simulator.shutdown()
                    throw error
                }
                let snapshot = simulator.ledger.snapshot()
                try await simulator.shutdown()
                guard snapshot.accepted == self.notifications, result.response.count == 6, result.response[1] == 2
                else {
                    throw UserError(
                        "round \(round): the gateway accepted \(snapshot.accepted) of \(self.notifications) "
                            + "(response \(result.response))"
                    )
                }
                let rate = result.notificationsPerSecond
                best = max(best, rate)
                print(
                    "round \(round): \(self.notifications) notifications, \(snapshot.distinctTokens) tokens, "
                        + "\(result.bytes / 1_000_000) MB in \(Self.format(result.seconds)) s: "
                        + "\(Self.format(rate / 1e6)) M/s validated "
                        + "(\(snapshot.reads) reads, ledger table \(snapshot.tableBytes >> 20) MiB)"
                )
            }
            print("gateway: best \(Self.format(best / 1e6)) M notifications/s validated on one event loop thread")
        }

        private static func format(_ value: Double) -> String {
            let hundredths = Int((value * 100).rounded())
            let fraction = hundredths % 100
            return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
        }
    }
}
