import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoData
import SalvoObservability
import SalvoRows
import SalvoSimulator
import SalvoSoak

/// `salvo soak`: rounds of bulk sends against the embedded simulator for a while, each checked against the ledger,
/// with the process sampled between rounds; fails on any lost or duplicated row, a refused token delivered, memory
/// that keeps growing or a descriptor leak.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Send round after round to the embedded simulator and prove every round against its ledger.",
        discussion: """
            Each round starts a fresh simulator under the plan, sends fresh tokens with the library's defaults and \
            checks the report against the ledger. Between rounds it samples resident memory, open descriptors and \
            threads. The soak fails (exit 1) on a lost row, a duplicate not among rows on connections that ended \
            without an answer, a refused token delivered, a last third of rounds whose peak memory is more than \
            10 % above the first third's, or descriptors or threads that keep growing. --report writes every \
            sample as JSON; --chart draws throughput, memory and errors in one HTML file. With --protocol broadcast \
            each round creates --tokens channels (default 1000), broadcasts one update to each, proves from the \
            channel registry that every channel got it exactly once, and deletes them.
            """
    )

    @Option(help: "How long to run: 90s, 30m, 1h (a round that has started finishes).")
    var duration: String = "60s"

    @Option(name: .customLong("protocol"), help: "binary, h2 or broadcast (channels, one update each).")
    var wireProtocol: SoakProtocol = .binary

    @Option(help: "The fault plan: a shipped name (\(SalvoData.faultPlans.joined(separator: ", "))) or a JSON file.")
    var plan: String = "realistic"

    @Option(
        help: "Tokens per round (default: 100000 binary, 20000 HTTP/2), or channels (broadcast: 1000, at most 10000)."
    )
    var tokens: Int?

    @Option(help: "Connections per round.")
    var connections: Int = 2

    @Option(help: "At most this many rounds.")
    var rounds: Int?

    @Option(name: .customLong("on-uncertain"), help: "resend (at least once) or report (at most once).")
    var onUncertain: OnUncertain = .resend

    @Option(help: "Write every round and sample as JSON to this file.")
    var report: String?

    @Option(help: "Draw throughput, memory and errors over time in this self-contained HTML file.")
    var chart: String?

    @Flag(help: "No progress line, even on a terminal.")
    var quiet = false

    @Option(
        help: """
            Send to a running `salvo simulate` instead of an embedded one: its gateway (or, with --protocol h2, its \
            HTTP/2 port) as HOST:PORT; needs --control and --certificates.
            """
    )
    var gateway: String?

    @Option(help: "With --gateway: the simulator's control endpoint (`simulate --control-port`), HOST:PORT or a URL.")
    var control: String?

    @Option(help: "With --gateway: the simulator's certificate folder (`simulate --certificates`).")
    var certificates: String?

    @Option(
        name: .customLong("control-token-file"),
        help: """
            With --gateway: the file holding the control endpoint's bearer token (default: control-token in the \
            --certificates folder, where `salvo simulate` writes it).
            """
    )
    var controlTokenFile: String?

    @Option(help: "With --gateway: the topic of the simulator's client certificate (`simulate --topic`).")
    var topic: String = "com.example.app"

    @OptionGroup var observe: ObservabilityOptions
    @OptionGroup var progressOptions: ProgressOptions

    func validate() throws {
        guard Self.seconds(self.duration) != nil else {
            throw ValidationError("--duration is a number with s, m or h (got \(self.duration))")
        }
        if let tokens, !(1...10_000_000).contains(tokens) {
            throw ValidationError("--tokens is 1 to 10000000 (got \(tokens))")
        }
        if self.wireProtocol == .broadcast {
            if let tokens, tokens > 10_000 {
                throw ValidationError("--tokens is at most 10000 channels with --protocol broadcast (got \(tokens))")
            }
            if self.gateway != nil {
                throw ValidationError("--protocol broadcast runs against the embedded simulator (no --gateway)")
            }
        }
        guard (1...64).contains(self.connections) else {
            throw ValidationError("--connections is 1 to 64 (got \(self.connections))")
        }
        if let rounds, rounds < 1 { throw ValidationError("--rounds is at least 1 (got \(rounds))") }
        if self.gateway != nil {
            guard self.control != nil, self.certificates != nil else {
                throw ValidationError("--gateway needs --control and --certificates (from `salvo simulate`)")
            }
            _ = try self.external()
        } else if self.control != nil || self.certificates != nil || self.controlTokenFile != nil {
            throw ValidationError("--control, --certificates and --control-token-file go with --gateway")
        }
    }

    /// `--gateway`, `--control` and `--certificates` as a running simulator's address.
    private func external() throws(ValidationError) -> SoakConfiguration.External? {
        guard let gateway = self.gateway, let control = self.control, let certificates = self.certificates else {
            return nil
        }
        guard let colon = gateway.lastIndex(of: ":"), let port = Int(gateway[gateway.index(after: colon)...]),
            (1...65535).contains(port)
        else {
            throw ValidationError("--gateway is HOST:PORT (got \(gateway))")
        }
        let text = control.contains("://") ? control : "http://" + control
        guard let url = URL(string: text), url.host != nil else {
            throw ValidationError("--control is HOST:PORT or an http URL (got \(control))")
        }
        let tokenFile = self.controlTokenFile ?? certificates + "/" + ControlToken.fileName
        let token: ControlToken
        do {
            token = try ControlToken.read(from: tokenFile)
        } catch {
            throw ValidationError(
                "--control needs the simulator's control token: \(error.reason)"
                    + (self.controlTokenFile == nil ? " (or give --control-token-file)" : "")
            )
        }
        return SoakConfiguration.External(
            host: String(gateway[..<colon]),
            port: port,
            control: url,
            controlToken: token,
            certificates: certificates,
            topic: self.topic
        )
    }

    func run() async throws {
        try await exitingOnUserError { try await self.soak() }
    }

    private func soak() async throws {
        let external = try self.external()
        let planPath = SalvoData.faultPlanPath(self.plan)
        var plan = FaultPlan()
        if external == nil {
            do {
                plan = try FaultPlan.load(contentsOf: planPath)
            } catch {
                throw UserError("--plan \(self.plan): \(error)")
            }
        }
        let configuration = SoakConfiguration(
            interface: self.wireProtocol.interface,
            duration: .milliseconds(Int64(Self.seconds(self.duration)! * 1000)),
            maximumRounds: self.rounds,
            plan: plan,
            planName: plan.name,
            tokens: self.tokens,
            connections: self.connections,
            onUncertain: self.onUncertain,
            external: external
        )
        // The outputs are checked before the first round: a soak that cannot write its record should not run.
        for path in [self.report, self.chart].compactMap({ $0 }) {
            guard FileManager.default.createFile(atPath: path + ".partial", contents: nil) else {
                throw UserError("\(path): cannot be written")
            }
            try? FileManager.default.removeItem(atPath: path + ".partial")
        }
        let observability = try await self.observe.start(label: "salvo.soak")
        if let external {
            print(
                "soak: \(configuration.interface.rawValue) to \(external.host):\(external.port), the ledger through "
                    + "\(external.control.absoluteString), over \(self.connections) connection(s), for \(self.duration)"
            )
        } else {
            print(
                "soak: \(configuration.interface.rawValue), plan \(plan.name) (\(planPath)), over "
                    + (self.wireProtocol == .broadcast
                        ? "one connection to each service" : "\(self.connections) connection(s)")
                    + ", for \(self.duration)"
            )
        }
        let progressOption = self.progressOptions.progress
        let quiet = self.quiet
        let displays = NIOLockedDisplays()
        let observers = SoakRunner.Observers(
            progress: { round, snapshot in
                displays.display(for: round) {
                    ProgressDisplay(progressOption, quiet: quiet, prefix: "round \(round): ")
                }
                .show(snapshot)
            },
            round: { round in
                displays.display(for: round.index) { ProgressDisplay(progressOption, quiet: quiet) }.finish()
                print(Self.line(round))
            },
            metrics: observability.jobMetrics(dimensions: [("protocol", configuration.interface.rawValue)])
        )
        let report: SoakReport
        do {
            report = try await SoakRunner.run(configuration, observers: observers)
        } catch {
            await observability.stop()
            throw UserError("the soak could not run: \(error)")
        }
        await observability.stop()
        for line in report.verdictLines { print(line) }
        if let path = self.report {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(report).write(to: URL(fileURLWithPath: path), options: .atomic)
        }
        if let path = self.chart {
            try Data(SoakChart.html(report).utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        }
        if !report.passed { throw ExitCode(1) }
    }

    /// One line per round.
    static func line(_ round: SoakRound) -> String {
        let status = round.passed ? "ok" : "FAIL (" + round.problems.joined(separator: "; ") + ")"
        if let broadcast = round.broadcast {
            return "round \(round.index): \(round.rows) channels in \(String(format: "%.2f", round.seconds)) s, "
                + "\(broadcast.channelsCreated) created, \(broadcast.updatesAccepted) updates recorded "
                + "(\(broadcast.retriedAnswers) answers retried, \(broadcast.missing) missing, "
                + "\(broadcast.duplicates) duplicated), rejected \(round.rejected), unsettled \(round.uncertain), "
                + "\(broadcast.channelsDeleted) deleted, memory \(round.peakResidentBytes >> 20) MiB peak, "
                + "\(round.after.openDescriptors) descriptors, \(round.after.threads) threads: \(status)"
        }
        return "round \(round.index): \(round.rows) rows in \(String(format: "%.2f", round.seconds)) s "
            + "(\(Int(round.throughput))/s), delivered \(round.delivered), rejected \(round.rejected), "
            + "uncertain \(round.uncertainEvents), reconnects \(round.reconnects) "
            + "(\(String(format: "%.1f", round.connectsPerSecond))/s), memory \(round.peakResidentBytes >> 20) MiB peak, "
            + "\(round.after.openDescriptors) descriptors, \(round.after.threads) threads: \(status)"
    }

    /// `90s`, `30m`, `1h` or plain seconds.
    static func seconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600]
        if let last = text.last, let unit = units[last], let value = Double(text.dropLast()), value > 0 {
            return value * unit
        }
        return Double(text).flatMap { $0 > 0 ? $0 : nil }
    }
}

/// One progress display per round, made when the round's first snapshot arrives.
private final class NIOLockedDisplays: @unchecked Sendable {
    // @unchecked: `displays` is only touched under `lock`.
    private let lock = NSLock()
    private var displays: [Int: ProgressDisplay] = [:]

    func display(for round: Int, make: () -> ProgressDisplay) -> ProgressDisplay {
        self.lock.lock()
        defer { self.lock.unlock() }
        if let display = self.displays[round] { return display }
        let display = make()
        self.displays[round] = display
        return display
    }
}

/// What `soak --protocol` takes: the two device interfaces, or broadcast channels.
enum SoakProtocol: String, ExpressibleByArgument, CaseIterable {
    case binary
    case h2
    case broadcast

    var interface: SoakConfiguration.Interface {
        switch self {
        case .binary: .binary
        case .h2: .h2
        case .broadcast: .broadcast
        }
    }
}
