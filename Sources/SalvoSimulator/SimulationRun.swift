import Dispatch
import Foundation

/// One `salvo simulate` run: plan loaded, simulator started with the certificates it is given; on `finish()`
/// the ledger and the verdict are written. Keeps the command line thin.
public final class SimulationRun: Sendable {
    public let options: SimulateOptions
    public let simulator: Simulator

    private init(options: SimulateOptions, simulator: Simulator) {
        self.options = options
        self.simulator = simulator
    }

    /// Prepares everything and starts the simulator.
    ///
    /// - Parameters:
    ///   - tls: the servers' certificate, key and the CA clients must chain to.
    ///   - providerKeys: the keys whose provider tokens the HTTP/2 endpoint accepts (with `http2Port`).
    public static func start(
        _ options: SimulateOptions,
        tls: SimulatorConfiguration.TLS,
        providerKeys: [HTTP2EndpointConfiguration.ProviderKey] = []
    ) async throws -> SimulationRun {
        if options.verdictPath != nil && options.expectedPath == nil {
            throw SimulatorError(.expectedTokens, "a verdict needs the expected tokens (--expected tokens.csv)")
        }
        var plan =
            try options.faultPlanPath.map { path throws(SimulatorError) in try FaultPlan.load(contentsOf: path) }
            ?? FaultPlan()
        try plan.apply(options: options.faultOptions)
        if let latency = options.latencyMilliseconds { plan.latencyMilliseconds = latency }
        if let jitter = options.jitterMilliseconds { plan.jitterMilliseconds = jitter }
        var configuration = SimulatorConfiguration(tls: tls)
        configuration.host = options.host
        configuration.gatewayPort = options.gatewayPort
        configuration.feedbackPort = options.feedbackPort
        configuration.plan = plan
        configuration.threads = options.threads
        configuration.maximumTokens = options.maximumTokens
        // About one 65-byte line per expected token: size the ledger for them up front.
        if let expectedPath = options.expectedPath,
            let size = try? FileManager.default.attributesOfItem(atPath: expectedPath)[.size] as? Int
        {
            configuration.expectedTokens = size / 65
        }
        if let http2Port = options.http2Port {
            var http2 = HTTP2EndpointConfiguration(port: http2Port, providerKeys: providerKeys)
            http2.cleartextPort = options.http2CleartextPort
            if let streams = options.http2MaximumStreams { http2.maximumConcurrentStreams = streams }
            configuration.http2 = http2
        }
        configuration.broadcast = try Self.broadcast(options)
        let simulator = try await Simulator.start(configuration)
        return SimulationRun(options: options, simulator: simulator)
    }

    /// The broadcast configuration the options ask for (nil without `channelPort`).
    static func broadcast(_ options: SimulateOptions) throws(SimulatorError) -> BroadcastConfiguration? {
        guard let port = options.channelPort else { return nil }
        guard options.http2Port != nil else {
            throw SimulatorError(.startup, "the channel management port needs the HTTP/2 port (broadcasts go there)")
        }
        var broadcast = BroadcastConfiguration(enabledApps: Set(options.broadcastApps))
        broadcast.channelManagementPort = port
        broadcast.subscribers = options.subscribers
        broadcast.channelLimit = options.channelLimit
        if let budget = options.broadcastBudget { broadcast.budget.noMessageStored = budget }
        if let budget = options.storedBroadcastBudget { broadcast.budget.mostRecentMessageStored = budget }
        return broadcast
    }

    /// Where the services listen. `credentials` (lines naming the files to connect with) goes after the
    /// binary services; `tokens` (how to sign provider tokens) after the HTTP/2 endpoint.
    public func banner(credentials: String = "", tokens: String = "") -> String {
        """
        APNs simulator (plan "\(self.simulator.plan.name)", seed \(self.simulator.plan.seed))\(self.latencyBanner)
          gateway   \(self.options.host):\(self.simulator.gatewayPort)
          feedback  \(self.options.host):\(self.simulator.feedbackPort)
        \(credentials)\(self.http2Banner(tokens: tokens))\(self.channelBanner)Stop with Ctrl-C (SIGINT) or SIGTERM; the ledger and the verdict are written on exit.
        """
    }

    private func http2Banner(tokens: String) -> String {
        guard let port = self.simulator.http2Port else { return "" }
        return """
              http2     \(self.options.host):\(port) (TLS, ALPN h2 or none; a client certificate, or provider tokens\(tokens))
            \(self.cleartextBanner)
            """
    }

    private var channelBanner: String {
        guard let port = self.simulator.channelManagementPort, let registry = self.simulator.channelRegistry else {
            return ""
        }
        let apps = registry.configuration.enabledApps.sorted().joined(separator: ", ")
        return """
              channels  \(self.options.host):\(port) (TLS, HTTP/2 channel management, the http2 port's credentials; \
            broadcast on for \(apps.isEmpty ? "no app" : apps); \(registry.configuration.subscribers) subscribers a channel)

            """
    }

    private var latencyBanner: String {
        let plan = self.simulator.plan
        guard plan.latencyMilliseconds > 0 || plan.jitterMilliseconds > 0 else { return "" }
        return "\n  latency   \(plan.latencyMilliseconds) ms each way"
            + (plan.jitterMilliseconds > 0 ? " + up to \(plan.jitterMilliseconds) ms jitter" : "")
    }

    private var cleartextBanner: String {
        guard let port = self.simulator.http2CleartextPort else { return "" }
        return
            "      h2c       \(self.options.host):\(port) (cleartext HTTP/2, prior knowledge; provider tokens only)\n"
    }

    /// Waits until the process gets SIGINT or SIGTERM.
    public func waitForTermination() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = ResumeOnce(continuation)
            for signalNumber in [SIGINT, SIGTERM] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { once.resume() }
                source.resume()
                once.keep(source)
            }
        }
    }

    /// Stops the simulator and writes the ledger and the verdict where the options say.
    /// Returns a readable summary (the verdict's, or the ledger's counters).
    @discardableResult
    public func finish() async throws -> String {
        var summary = "ledger: \(self.simulator.ledger.snapshot().accepted) notifications accepted"
        var failure: (any Error)?
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            if let path = self.options.ledgerPath {
                try encoder.encode(self.simulator.ledger.snapshot()).write(to: URL(fileURLWithPath: path))
            }
            if let expectedPath = self.options.expectedPath {
                let verdict = self.simulator.verdict(expected: try ExpectedTokens.read(contentsOf: expectedPath))
                if let path = self.options.verdictPath {
                    try encoder.encode(verdict).write(to: URL(fileURLWithPath: path))
                }
                summary = verdict.summary
            }
            if let registry = self.simulator.channelRegistry {
                let expected = try self.options.broadcastExpectedPath.map { path throws(SimulatorError) in
                    try BroadcastExpectation.read(contentsOf: path)
                }
                let broadcasts = registry.verdict(expected: expected)
                if let path = self.options.broadcastVerdictPath {
                    try encoder.encode(broadcasts).write(to: URL(fileURLWithPath: path))
                }
                summary += "\n" + broadcasts.summary
            }
        } catch {
            failure = error
        }
        try await self.simulator.shutdown()
        if let failure { throw failure }
        return summary
    }
}

/// Resumes a continuation once, whichever signal comes first, and keeps the signal sources alive.
private final class ResumeOnce: @unchecked Sendable {
    // @unchecked: all mutable state is behind `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<Void, Never>) {
        self.continuation = continuation
    }

    func keep(_ source: any DispatchSourceSignal) {
        self.lock.withLock { self.sources.append(source) }
    }

    func resume() {
        let continuation = self.lock.withLock {
            let continuation = self.continuation
            self.continuation = nil
            return continuation
        }
        continuation?.resume()
    }
}
