import Dispatch
import Foundation

/// One `salvo simulate` run: certificates made if missing, plan loaded, simulator started; on
/// `finish()` the ledger and the verdict are written. Keeps the command line thin.
public final class SimulationRun: Sendable {
    public let options: SimulateOptions
    public let simulator: Simulator
    public let certificates: DevelopmentCertificates.Paths
    /// The token-signing key the HTTP/2 endpoint knows, when it runs.
    public let signingKey: DevelopmentSigningKey?

    private init(
        options: SimulateOptions,
        simulator: Simulator,
        certificates: DevelopmentCertificates.Paths,
        signingKey: DevelopmentSigningKey?
    ) {
        self.options = options
        self.simulator = simulator
        self.certificates = certificates
        self.signingKey = signingKey
    }

    /// Prepares everything and starts the simulator.
    public static func start(_ options: SimulateOptions) async throws -> SimulationRun {
        if options.verdictPath != nil && options.expectedPath == nil {
            throw SimulatorError(.expectedTokens, "a verdict needs the expected tokens (--expected tokens.csv)")
        }
        let paths = try DevelopmentCertificates.ensure(in: options.certificateFolder, topic: options.topic)
        var plan =
            try options.faultPlanPath.map { path throws(SimulatorError) in try FaultPlan.load(contentsOf: path) }
            ?? FaultPlan()
        try plan.apply(options: options.faultOptions)
        var configuration = SimulatorConfiguration(tls: try SimulatorConfiguration.TLS(paths: paths))
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
        var signingKey: DevelopmentSigningKey?
        if let http2Port = options.http2Port {
            let key = try DevelopmentSigningKey.ensure(in: options.certificateFolder)
            var http2 = HTTP2EndpointConfiguration(port: http2Port, providerKeys: [key.providerKey])
            http2.cleartextPort = options.http2CleartextPort
            configuration.http2 = http2
            signingKey = key
        }
        let simulator = try await Simulator.start(configuration)
        return SimulationRun(options: options, simulator: simulator, certificates: paths, signingKey: signingKey)
    }

    /// What a user needs to connect: ports, plan and the client certificate files.
    public var banner: String {
        """
        APNs simulator (plan "\(self.simulator.plan.name)", seed \(self.simulator.plan.seed))
          gateway   \(self.options.host):\(self.simulator.gatewayPort)
          feedback  \(self.options.host):\(self.simulator.feedbackPort)
          CA        \(self.certificates.ca)
          client    \(self.certificates.client)
          key       \(self.certificates.clientKey)
          (a client from another CA, refused: \(self.certificates.foreignClient))
        \(self.http2Banner)Stop with Ctrl-C (SIGINT) or SIGTERM; the ledger and the verdict are written on exit.
        """
    }

    private var http2Banner: String {
        guard let port = self.simulator.http2Port, let key = self.signingKey else { return "" }
        return """
              http2     \(self.options.host):\(port) (TLS, ALPN h2 or none; the client certificate above, or tokens
                        signed with \(key.path), --key-id \(DevelopmentSigningKey.keyID) --team-id \(DevelopmentSigningKey.teamID))
            \(self.cleartextBanner)
            """
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
