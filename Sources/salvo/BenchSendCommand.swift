import APNSWire
import ArgumentParser
import Foundation
import SalvoEngine
import SalvoIO
import SalvoSend
import SalvoSimulator
import SalvoTestSupport

extension BenchCommand {
    /// `salvo bench send`: end-to-end bulk sends to the embedded simulator, one row per transport and
    /// shard count, each checked against the simulator's ledger.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End-to-end notifications/s to the embedded simulator (161-byte frames, 100-byte payload)."
        )

        @Option(help: "Tokens per run.")
        var tokens: Int = 1_000_000

        @Option(parsing: .upToNextOption, help: "Shard counts to measure.")
        var shards: [Int] = [1, 2, 4, 8]

        @Option(parsing: .upToNextOption, help: "Transports to measure: uring, socket.")
        var transports: [String] = ["uring", "socket"]

        @Option(help: "Event-loop threads of the simulator.")
        var simulatorThreads: Int = 1

        @Option(help: "Runs per row; the best is reported.")
        var runs: Int = 2

        @OptionGroup var progressOptions: ProgressOptions

        @Flag(help: "Keep a journal of every row, as `send --journal` does (state file, reject log, 200 ms sync).")
        var journal = false

        @Flag(
            help:
                "A payload per row: a template with two placeholders (a name, an :int badge) rendered from each row's columns."
        )
        var template = false

        func validate() throws {
            guard (1...50_000_000).contains(self.tokens) else {
                throw ValidationError("--tokens is 1 to 50000000 (got \(self.tokens))")
            }
            guard self.shards.allSatisfy({ (1...64).contains($0) }) else {
                throw ValidationError("--shards are 1 to 64")
            }
            guard self.transports.allSatisfy({ $0 == "uring" || $0 == "socket" }) else {
                throw ValidationError("--transports are uring and/or socket")
            }
            guard (1...20).contains(self.runs), (1...16).contains(self.simulatorThreads) else {
                throw ValidationError("--runs is 1 to 20, --simulator-threads 1 to 16")
            }
        }

        func run() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-bench-\(getpid())").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let tokenFile = folder + "/tokens.csv"
            var generator = TokenGenerator(seed: 0xBE4C)
            var expected: [DeviceToken] = []
            expected.reserveCapacity(self.tokens)
            let handle = try createFile(tokenFile)
            var chunk = self.template ? "token,name,badge\n" : "token\n"
            for index in 0..<self.tokens {
                let token = generator.next()
                expected.append(token)
                chunk += token.hexString + (self.template ? ",Customer \(index % 100_000),\(index % 100)\n" : "\n")
                if chunk.utf8.count >= 1 << 20 {
                    handle.write(Data(chunk.utf8))
                    chunk = ""
                }
            }
            handle.write(Data(chunk.utf8))
            try handle.close()

            let payload = try Payload(
                json:
                    #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
            )
            let payloads =
                self.template
                ? PayloadTemplates(
                    try PayloadTemplate(
                        json: Array(
                            #"{"aps":{"alert":"Hello {{name}}, your order shipped","badge":"{{badge:int}}","sound":"default"},"campaign":"c-0001"}"#
                                .utf8
                        ),
                        file: "bench-template.json"
                    )
                ) : nil
            let template = try FrameTemplate(command: .framed, payload: payloads?.templates[0].probe ?? payload)
            let certificates = try CertificateFactory()
            let paths = try certificates.write(to: folder + "/certificates", topic: "com.example.bench")
            let credentials = GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            )
            if payloads != nil {
                print(
                    "\(self.tokens) notifications, a payload per row (about 170-byte frames), best of \(self.runs) run(s)"
                        + (self.journal ? ", journal on" : "")
                )
            } else {
                print(
                    "\(self.tokens) notifications of \(template.frameByteCount) bytes, best of \(self.runs) run(s)"
                        + (self.journal ? ", journal on" : "")
                )
            }
            print("transport  shards  notifications/s  seconds  ledger")
            var failed = false
            for transportName in self.transports {
                let transport: BinaryTransport = transportName == "uring" ? .uring : .socket
                if transport == .uring, let refusal = TransportKind.uringRefusal {
                    print("uring: skipped, io_uring is refused here: \(refusal)")
                    continue
                }
                for shards in self.shards {
                    var best: JobReport?
                    var ledgerOK = true
                    for run in 1...self.runs {
                        let display = ProgressDisplay(
                            self.progressOptions.progress,
                            quiet: false,
                            prefix: "\(transportName) \(shards) shard(s), run \(run): "
                        )
                        var configuration = SimulatorConfiguration(tls: .init(certificates))
                        configuration.threads = self.simulatorThreads
                        configuration.maximumTokens = self.tokens + self.tokens / 4 + 1024
                        configuration.expectedTokens = self.tokens
                        let simulator = try await Simulator.start(configuration)
                        let job = BinaryJobConfiguration(
                            host: "127.0.0.1",
                            port: simulator.gatewayPort,
                            credentials: credentials,
                            template: template,
                            connections: shards,
                            transport: transport
                        )
                        let source = TokenSource(
                            files: [tokenFile],
                            payloads: payloads.map { RowPayloads(templates: $0, limit: .binary) }
                        )
                        let summary = try source.validate()
                        var journal: JobJournal?
                        if self.journal {
                            let manifest = JournalManifest(inputs: [], settings: [:], lineCounts: summary.lineCounts)
                            let started = try JobJournal.start(folder + "/journal", manifest: manifest)
                            source.attach(started.rows!, resendWritten: true)
                            started.startSyncing()
                            journal = started
                        }
                        defer { journal?.stopSyncing() }
                        let result = try await BinaryJob.run(
                            configuration: job,
                            source: source,
                            summary: summary,
                            inputRows: summary.validRows,
                            progress: display.callback
                        )
                        display.finish()
                        if let error = result.error { throw error }
                        let verdict = simulator.verdict(expected: ExpectedTokens(expected), listLimit: 3)
                        try await simulator.shutdown()
                        ledgerOK = ledgerOK && verdict.passed && result.report.isComplete
                        if best == nil || result.report.notificationsPerSecond > best!.notificationsPerSecond {
                            best = result.report
                        }
                    }
                    let report = best!
                    failed = failed || !ledgerOK
                    print(
                        "\(transportName.padding(toLength: 9, withPad: " ", startingAt: 0))  "
                            + "\(String(shards).padding(toLength: 6, withPad: " ", startingAt: 0))  "
                            + "\(String(Int(report.notificationsPerSecond)).padding(toLength: 15, withPad: " ", startingAt: 0))  "
                            + "\(String(format3(report.seconds)).padding(toLength: 7, withPad: " ", startingAt: 0))  "
                            + (ledgerOK ? "exactly once" : "MISMATCH")
                    )
                }
            }
            if failed { throw ExitCode(1) }
        }
    }
}
