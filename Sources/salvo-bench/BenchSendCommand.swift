import APNSWire
import ArgumentParser
import Foundation
import SalvoBenchmarkSupport
import SalvoBinary
import SalvoConsole
import SalvoIO
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport

extension BenchCommand {
    /// `salvo-bench send`: end-to-end bulk sends to the embedded simulator (each checked against its ledger) or to
    /// the reference receiver, one row per transport and shard count, each beside the limit of this host's TLS link
    /// measured in the same run by the reference sender and receiver (`Benchmarks/reference`).
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "End-to-end notifications/s to the embedded simulator or the reference receiver, each beside this host's limit (161-byte frames, 100-byte payload)."
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

        @Flag(
            help:
                "Keep a journal, as `send --journal` does: the input hashed and its line ends counted, a state file, 200 ms syncs with checkpoints."
        )
        var journal = false

        @Option(
            name: .customLong("resume-after"),
            help:
                "With --journal: stop each run once this fraction of the rows (0 to 1) is settled, then run the same job again, which resumes it; the resumed run's time to its first row is printed."
        )
        var resumeAfter: Double?

        @Flag(
            help:
                "A payload per row: a template with two placeholders (a name, an :int badge) rendered from each row's columns; each run is followed by one of the same file with a fixed payload, and the templates' time is printed as a multiple of its."
        )
        var template = false

        @Option(
            help:
                "Where the rows go: simulator (the embedded simulator, each token checked against its ledger) or reference (the reference receiver, a C program that decrypts and walks every frame, in its own process: the same sink as the limit's)."
        )
        var sink: String = "simulator"

        @Flag(
            inversion: .prefixedNo,
            help:
                "Measure the limit first: the reference sender and receiver (C, OpenSSL and io_uring, built with cc on first use) with the same frames, rows and connections; each row then shows its ratio to it."
        )
        var limit = true

        @Option(help: "The folder of the reference link's C sources (default: Benchmarks/reference of the checkout).")
        var referenceDir: String?

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
            guard self.sink == "simulator" || self.sink == "reference" else {
                throw ValidationError("--sink is simulator or reference (got \(self.sink))")
            }
            if let fraction = self.resumeAfter {
                guard self.journal else {
                    throw ValidationError("--resume-after resumes a journaled job: add --journal")
                }
                guard fraction > 0 && fraction < 1 else {
                    throw ValidationError("--resume-after is a fraction between 0 and 1 (got \(fraction))")
                }
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
            // With templates, each run is followed by one of the same rows with the fixed payload: what the
            // templates cost is their time over that one's, on the same file, same host, same minute.
            let fixedTemplate = try FrameTemplate(command: .framed, payload: payload)
            var fixedBest: [String: (template: Double, fixed: Double)] = [:]
            let certificates = try CertificateFactory()
            let paths = try certificates.write(to: folder + "/certificates", topic: "com.example.bench")
            let credentials = GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            )
            let what =
                payloads != nil
                ? "\(self.tokens) notifications, a payload per row (about 170-byte frames)"
                : "\(self.tokens) notifications of \(template.frameByteCount) bytes"
            print(
                "\(what), best of \(self.runs) run(s), timed from BulkSend.prepare (the file opened"
                    + (self.journal ? ", hashed, line ends counted, journal started" : "") + ") to the end"
                    + (self.resumeAfter.map { "; each job stopped at \(Int($0 * 100)) % and resumed" } ?? "")
            )
            let reference = self.sink == "reference"
            let limitLink = try self.limitLink(frameBytes: template.frameByteCount, needed: reference)
            // The best limit per shard count over every row, for the lines after the table.
            var limits: [Int: ReferenceLink.Limit] = [:]
            let link = reference ? try ReferenceLink.prepare(sources: self.referenceDir) : nil
            print(
                reference
                    ? "rows: salvo to the reference receiver (its own process: `user µs/row` is the sender's alone; "
                        + "`received` checks its count of frames)"
                    : "rows: salvo to the embedded simulator (the same process: `user µs/row` holds the simulator's "
                        + "CPU too; `ledger` checks each token against its ledger)"
            )
            print(
                "transport  shards  notifications/s  seconds  first row  "
                    + (reference ? "received    " : "ledger      ") + "  user µs/row  limit/s    ratio"
                    + (self.resumeAfter != nil ? "  resumed: first row  rows       seconds" : "")
            )
            var failed = false
            for transportName in self.transports {
                let transport: BinaryTransport = transportName == "uring" ? .uring : .socket
                if transport == .uring, let refusal = TransportKind.uringRefusal {
                    print("uring: skipped, io_uring is refused here: \(refusal)")
                    continue
                }
                for shards in self.shards {
                    var best: Measured?
                    var bestLimit: ReferenceLink.Limit?
                    var ledgerOK = true
                    for run in 1...self.runs {
                        // The limit just before each run, so that both see the host in the same state.
                        if let limitLink {
                            let measured = try limitLink.measure(
                                frames: self.tokens,
                                connections: shards,
                                frameBytes: template.frameByteCount,
                                certificate: paths.server,
                                key: paths.serverKey
                            )
                            if bestLimit == nil || measured.seconds < bestLimit!.seconds { bestLimit = measured }
                            if limits[shards] == nil || measured.seconds < limits[shards]!.seconds {
                                limits[shards] = measured
                            }
                        }
                        let display = ProgressDisplay(
                            self.progressOptions.progress,
                            quiet: false,
                            prefix: "\(transportName) \(shards) shard(s), run \(run): "
                        )
                        let sink = try await Sink.start(
                            reference: link,
                            certificates: certificates,
                            paths: paths,
                            threads: self.simulatorThreads,
                            tokens: self.tokens
                        )
                        let job = BinaryJobConfiguration(
                            host: "127.0.0.1",
                            port: sink.port,
                            credentials: credentials,
                            template: template,
                            connections: shards,
                            transport: transport
                        )
                        let journalFolder = folder + "/journal-\(transportName)-\(shards)-\(run)"
                        let request = SendRequest(
                            files: [tokenFile],
                            interface: .binary(job),
                            journal: self.journal ? SendJournal(directory: journalFolder) : nil,
                            payloads: payloads
                        )
                        let userBefore = Self.userCPUSeconds()
                        var measured = try await Self.measure(request, display: display, stopAt: self.resumeAfter)
                        if self.resumeAfter != nil && measured.stopped {
                            // The same job again: it resumes from the journal's last checkpoint.
                            let resumed = try await Self.measure(request, display: display, stopAt: nil)
                            measured.resumed = Measured.Resumed(
                                seconds: resumed.seconds,
                                firstRow: resumed.firstRow,
                                rows: resumed.rows
                            )
                            measured.delivered += resumed.delivered
                        }
                        measured.userSeconds = Self.userCPUSeconds() - userBefore
                        display.finish()
                        let sinkOK = try await sink.finish(expected: expected)
                        try? FileManager.default.removeItem(atPath: journalFolder)
                        ledgerOK = ledgerOK && sinkOK && measured.delivered == self.tokens
                        if best == nil || measured.seconds < best!.seconds { best = measured }
                        if payloads != nil && self.resumeAfter == nil {
                            let fixedSink = try await Sink.start(
                                reference: link,
                                certificates: certificates,
                                paths: paths,
                                threads: self.simulatorThreads,
                                tokens: self.tokens
                            )
                            var fixedJob = job
                            fixedJob.port = fixedSink.port
                            fixedJob.template = fixedTemplate
                            let fixedRequest = SendRequest(
                                files: [tokenFile],
                                interface: .binary(fixedJob),
                                journal: self.journal ? SendJournal(directory: journalFolder + "-fixed") : nil,
                                payloads: nil
                            )
                            let fixed = try await Self.measure(fixedRequest, display: display, stopAt: nil)
                            display.finish()
                            let fixedOK = try await fixedSink.finish(expected: expected)
                            try? FileManager.default.removeItem(atPath: journalFolder + "-fixed")
                            ledgerOK = ledgerOK && fixedOK && fixed.delivered == self.tokens
                            let key = "\(transportName) \(shards)"
                            let previous = fixedBest[key] ?? (.infinity, .infinity)
                            fixedBest[key] = (
                                min(previous.template, measured.seconds), min(previous.fixed, fixed.seconds)
                            )
                        }
                    }
                    let result = best!
                    failed = failed || !ledgerOK
                    let rate = Double(result.rows) / result.seconds
                    var line =
                        "\(transportName.padding(toLength: 9, withPad: " ", startingAt: 0))  "
                        + "\(String(shards).padding(toLength: 6, withPad: " ", startingAt: 0))  "
                        + "\(String(Int(Double(result.rows) / result.seconds)).padding(toLength: 15, withPad: " ", startingAt: 0))  "
                        + "\(format3(result.seconds).padding(toLength: 7, withPad: " ", startingAt: 0))  "
                        + "\(format3(result.firstRow).padding(toLength: 9, withPad: " ", startingAt: 0))  "
                        + (ledgerOK ? (reference ? "all counted " : "exactly once") : "MISMATCH    ") + "  "
                        + Self.microseconds(result.userSeconds, per: result.rows).padding(
                            toLength: 11,
                            withPad: " ",
                            startingAt: 0
                        )
                        + "  "
                        + (bestLimit.map { Self.millions($0.framesPerSecond) } ?? "-").padding(
                            toLength: 9,
                            withPad: " ",
                            startingAt: 0
                        )
                        + "  "
                        + (bestLimit.map { format3(rate / $0.framesPerSecond) } ?? "-").padding(
                            toLength: 5,
                            withPad: " ",
                            startingAt: 0
                        )
                    if let resumed = result.resumed {
                        line +=
                            "           \(format3(resumed.firstRow).padding(toLength: 9, withPad: " ", startingAt: 0))  "
                            + "\(String(resumed.rows).padding(toLength: 9, withPad: " ", startingAt: 0))  "
                            + format3(resumed.seconds)
                    } else if self.resumeAfter != nil {
                        line += "  (the job settled nothing to stop at before its end: no resume)"
                    }
                    print(line)
                }
            }
            for (key, best) in fixedBest.sorted(by: { $0.key < $1.key }) {
                print(
                    "templates  \(key) shard(s): best \(format3(best.template)) s; the fixed payload on the same rows "
                        + "(a run after each): best \(format3(best.fixed)) s; the templates take "
                        + "\(format3(best.template / best.fixed))× its time"
                )
            }
            for (shards, limit) in limits.sorted(by: { $0.key < $1.key }) {
                print(
                    "limit  \(shards) connection(s): \(Self.millions(limit.framesPerSecond)) frames/s, "
                        + "\(Int(limit.framesPerSecond * Double(limit.frameBytes) / 1e6)) MB/s; CPU µs a frame: sender "
                        + "\(Self.microseconds(limit.senderUserSeconds, per: limit.frames)) user + "
                        + "\(Self.microseconds(limit.senderSystemSeconds, per: limit.frames)) sys, receiver "
                        + "\(Self.microseconds(limit.receiver.userSeconds, per: limit.frames)) user + "
                        + "\(Self.microseconds(limit.receiver.systemSeconds, per: limit.frames)) sys"
                )
            }
            if failed { throw ExitCode(1) }
        }

        /// The reference link that measures the limit, after printing what the limit is: the reference sender's rate
        /// to the reference receiver for the same frames, rows and connections, measured before each run of each
        /// row. None with `--no-limit`, or when the link cannot be built and the rows do not need it (`needed`: the
        /// reference sink).
        func limitLink(frameBytes: Int, needed: Bool) throws -> ReferenceLink? {
            guard self.limit else { return nil }
            let link: ReferenceLink
            do {
                link = try ReferenceLink.prepare(sources: self.referenceDir)
            } catch {
                if needed { throw error }
                print("limit: not measured: \(error)")
                return nil
            }
            print(
                "limit: the reference sender to the reference receiver (C: frames encoded once, TLS 1.3 with OpenSSL, "
                    + "io_uring, a thread per connection), \(self.tokens) frames of \(frameBytes) bytes over the row's "
                    + "connections, from the handshakes done to the last barrier answered, measured before each run; "
                    + "ratio: the row's best notifications/s over the best limit of its runs"
            )
            return link
        }

        /// Where a run's rows go: a fresh simulator or reference receiver per run.
        enum Sink {
            case simulator(Simulator)
            case reference(ReferenceReceiver)

            static func start(
                reference: ReferenceLink?,
                certificates: CertificateFactory,
                paths: CertificateFactory.Paths,
                threads: Int,
                tokens: Int
            ) async throws -> Sink {
                if let reference {
                    return .reference(
                        try ReferenceReceiver.start(reference, certificate: paths.server, key: paths.serverKey)
                    )
                }
                var configuration = SimulatorConfiguration(tls: .init(certificates))
                configuration.threads = threads
                configuration.maximumTokens = tokens + tokens / 4 + 1024
                configuration.expectedTokens = tokens
                return .simulator(try await Simulator.start(configuration))
            }

            var port: Int {
                switch self {
                case .simulator(let simulator): simulator.gatewayPort
                case .reference(let receiver): receiver.port
                }
            }

            /// Stops the sink: whether it received what was expected (the simulator: each token exactly once, by its
            /// ledger; the reference receiver: as many well-formed frames as tokens).
            func finish(expected: [DeviceToken]) async throws -> Bool {
                switch self {
                case .simulator(let simulator):
                    let verdict = simulator.verdict(expected: ExpectedTokens(expected), listLimit: 3)
                    try await simulator.shutdown()
                    return verdict.passed
                case .reference(let receiver):
                    let counts = try receiver.stop()
                    return counts.frames == expected.count && counts.invalid == 0
                }
            }
        }

        /// User CPU seconds of the whole process so far.
        static func userCPUSeconds() -> Double {
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        }

        /// `seconds` per row in microseconds, to three places.
        static func microseconds(_ seconds: Double, per rows: Int) -> String {
            String(format: "%.3f", seconds / Double(max(1, rows)) * 1e6)
        }

        /// A rate in millions, to two places ("6.31 M").
        static func millions(_ rate: Double) -> String {
            String(format: "%.2f M", rate / 1e6)
        }

        /// One job (or its first part) as `send` runs it.
        struct Measured {
            /// Seconds from `prepare` to the end, and to the first row handed to a connection.
            var seconds: Double
            var firstRow: Double
            /// Rows this run sent, and delivered.
            var rows: Int
            var delivered: Int
            /// Whether the run stopped before the job's end (asked to, at `stopAt`).
            var stopped = false
            /// User CPU seconds of the process over the run (and its resumed part).
            var userSeconds = 0.0
            /// The resumed run, after a stop.
            var resumed: Resumed?

            struct Resumed {
                var seconds: Double
                var firstRow: Double
                var rows: Int
            }
        }

        /// Prepares and runs `request`, stopping it (in order: rows in flight settle) once `stopAt` of its rows
        /// are settled.
        static func measure(
            _ request: SendRequest,
            display: ProgressDisplay,
            stopAt: Double?
        ) async throws -> Measured {
            let clock = ContinuousClock()
            let started = clock.now
            let send = try await BulkSend.prepare(request)
            let stop = JobStop(grace: .seconds(30))
            var progress = display.callback
            if let stopAt {
                let shown = display.callback
                progress = { @Sendable snapshot in
                    shown?(snapshot)
                    // Once: a second request would stop at once, leaving the rows in flight uncertain.
                    if stop.reason == nil && Double(snapshot.settled) >= stopAt * Double(max(1, snapshot.validRows)) {
                        stop.request(reason: "bench: stopped to be resumed")
                    }
                }
            }
            // A job the journal holds as finished sends nothing (its report is the earlier run's).
            let finished = send.finishedJob != nil
            let result = try await send.run(progress: progress, stop: stop)
            let elapsed = clock.now - started
            if let error = result.error { throw error }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            // A resumed run's report covers the whole job: this run's rows are those earlier runs did not settle.
            let delivered = finished ? 0 : result.report.delivered - (result.report.resumed?.settledBefore ?? 0)
            return Measured(
                seconds: seconds,
                firstRow: finished ? 0 : result.report.firstRowSeconds ?? 0,
                rows: delivered,
                delivered: delivered,
                stopped: result.stopped != nil,
                resumed: nil
            )
        }
    }
}
