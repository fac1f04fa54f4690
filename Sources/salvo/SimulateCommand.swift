import ArgumentParser
import Foundation
import SalvoConsole
import SalvoDevelopment
import SalvoObservability
import SalvoSimulator

/// `salvo simulate`: the APNs simulator (binary gateway + feedback service) until SIGINT/SIGTERM.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract:
            "Run the APNs simulator: binary gateway, feedback service and (with --h2-port) the HTTP/2 API, with faults and a delivery ledger.",
        discussion: """
            Makes development certificates in the certificate folder when it has none and prints the client \
            certificate to connect with. Runs until interrupted, then writes the ledger and the verdict.
            Fault options (--fault name=value, repeatable): \(FaultPlan.optionNames.joined(separator: ", ")).
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The gateway port (0 = any free port).")
    var gatewayPort = 2195

    @Option(help: "The feedback service port (0 = any free port).")
    var feedbackPort = 2196

    @Option(help: "The certificate folder (made if missing).")
    var certificates = "out/certs"

    @Option(help: "The topic (bundle id) of a newly made client certificate.")
    var topic = "com.example.app"

    @Option(name: .customLong("plan"), help: "A fault plan JSON file, e.g. data/faults/realistic.json.")
    var planPath: String?

    @Option(name: .customLong("fault"), help: "A fault option name=value on top of the plan (repeatable).")
    var faults: [String] = []

    @Option(help: "Write the ledger's counters (JSON) here on exit.")
    var ledger: String?

    @Option(help: "The expected tokens (CSV: one hex token per line, or a `token` column) for the verdict.")
    var expected: String?

    @Option(help: "Write the verdict (JSON) here on exit; needs --expected.")
    var verdict: String?

    @Option(help: "Event loop threads.")
    var threads = 1

    @Option(name: .customLong("h2-port"), help: "Also serve the HTTP/2 provider API on this port (0 = any free port).")
    var http2Port: Int?

    @Option(
        name: .customLong("h2c-port"),
        help: "With --h2-port, also serve cleartext HTTP/2 (prior knowledge, provider tokens only) on this port."
    )
    var http2CleartextPort: Int?

    @Option(
        name: .customLong("latency-ms"),
        help: "Hold every byte this many milliseconds in each direction on every endpoint (a round trip is twice this)."
    )
    var latencyMilliseconds: Int?

    @Option(name: .customLong("jitter-ms"), help: "With --latency-ms, add up to this many milliseconds (seeded).")
    var jitterMilliseconds: Int?

    @Option(
        name: .customLong("h2-max-streams"),
        help: "The HTTP/2 endpoint's announced SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)."
    )
    var http2MaximumStreams: Int?

    @Option(
        name: .customLong("channel-port"),
        help: """
            With --h2-port, serve the channel management API on this port (0 = any free port), and broadcasts \
            (POST /4/broadcasts/apps/<bundle id>) on the HTTP/2 port.
            """
    )
    var channelPort: Int?

    @Option(
        name: .customLong("broadcast-app"),
        help: "With --channel-port, an app (bundle id) with broadcast turned on (repeatable; default: --topic)."
    )
    var broadcastApps: [String] = []

    @Option(help: "With --channel-port, the simulated devices subscribed to each new channel.")
    var subscribers = 100

    @Option(name: .customLong("channel-limit"), help: "With --channel-port, the live channels an app may have.")
    var channelLimit = 10_000

    @Option(
        name: .customLong("broadcast-budget"),
        help: "With --channel-port, broadcasts per channel and minute before 429, on No Message Stored channels (120)."
    )
    var broadcastBudget: Int?

    @Option(
        name: .customLong("stored-broadcast-budget"),
        help: "The same on Most Recent Message Stored channels (30)."
    )
    var storedBroadcastBudget: Int?

    @Option(
        name: .customLong("broadcast-verdict"),
        help: "With --channel-port, write the broadcast verdict (JSON) here on exit."
    )
    var broadcastVerdict: String?

    @Option(
        name: .customLong("broadcast-expected"),
        help: """
            With --channel-port, the channels each expected to get one update, for the broadcast verdict: a channel \
            inventory CSV (a channel id column, optionally an updates column) or one id a line.
            """
    )
    var broadcastExpected: String?

    @Option(
        name: .customLong("control-port"),
        help: """
            Serve the control endpoint here (0 = any free port): GET /plan, GET /ledger, POST /reset, POST /verdict \
            with the expected tokens — what `salvo soak --gateway` judges its rounds with. Every request needs \
            `Authorization: Bearer <control token>`.
            """
    )
    var controlPort: Int?

    @Option(
        name: .customLong("control-host"),
        help: "With --control-port, the address the control endpoint listens on (not --host: it can empty the ledger)."
    )
    var controlHost = "127.0.0.1"

    @Option(
        name: .customLong("control-token-file"),
        help: """
            With --control-port, the control endpoint's bearer token, read from this file (its first line). Without \
            it a random token is made, printed, and written (mode 0600) to control-token in the certificate folder.
            """
    )
    var controlTokenFile: String?

    @OptionGroup var observe: ObservabilityOptions

    func validate() throws {
        let ports: [(String, Int?)] = [
            ("--gateway-port", self.gatewayPort), ("--feedback-port", self.feedbackPort),
            ("--h2-port", self.http2Port), ("--h2c-port", self.http2CleartextPort),
            ("--control-port", self.controlPort), ("--channel-port", self.channelPort),
        ]
        for case (let option, let port?) in ports where !(0...65535).contains(port) {
            throw ValidationError("\(option) is 0 to 65535 (0 = any free port; got \(port))")
        }
        guard (1...256).contains(self.threads) else {
            throw ValidationError("--threads is 1 to 256 (got \(self.threads))")
        }
        if self.controlPort == nil && (self.controlTokenFile != nil || self.controlHost != "127.0.0.1") {
            throw ValidationError("--control-host and --control-token-file go with --control-port")
        }
    }

    func run() async throws {
        for (name, value) in [
            ("--latency-ms", self.latencyMilliseconds), ("--jitter-ms", self.jitterMilliseconds),
        ] where (value ?? 0) < 0 {
            throw ValidationError("\(name) needs a whole number of milliseconds ≥ 0, not \(value!)")
        }
        if self.channelPort != nil && self.http2Port == nil {
            throw ValidationError("--channel-port needs --h2-port: broadcasts go to the HTTP/2 port")
        }
        if self.channelPort == nil
            && (!self.broadcastApps.isEmpty || self.broadcastVerdict != nil || self.broadcastBudget != nil
                || self.storedBroadcastBudget != nil || self.broadcastExpected != nil)
        {
            throw ValidationError(
                "--broadcast-app, --broadcast-budget, --stored-broadcast-budget, --broadcast-verdict and "
                    + "--broadcast-expected go with --channel-port"
            )
        }
        for (name, value) in [
            ("--subscribers", self.subscribers), ("--channel-limit", self.channelLimit),
            ("--broadcast-budget", self.broadcastBudget ?? 0),
            ("--stored-broadcast-budget", self.storedBroadcastBudget ?? 0),
        ] where value < 0 {
            throw ValidationError("\(name) needs a whole number ≥ 0, not \(value)")
        }
        if let streams = self.http2MaximumStreams, streams < 1 {
            throw ValidationError("--h2-max-streams needs at least 1 stream, not \(streams)")
        }
        if self.http2CleartextPort != nil && self.http2Port == nil {
            throw ValidationError("--h2c-port needs --h2-port: the cleartext port is a second door to the HTTP/2 API")
        }
        var options = SimulateOptions()
        options.host = self.host
        options.gatewayPort = self.gatewayPort
        options.feedbackPort = self.feedbackPort
        options.faultPlanPath = self.planPath
        options.faultOptions = self.faults
        options.ledgerPath = self.ledger
        options.expectedPath = self.expected
        options.verdictPath = self.verdict
        options.threads = max(1, self.threads)
        options.http2Port = self.http2Port
        options.http2CleartextPort = self.http2CleartextPort
        options.latencyMilliseconds = self.latencyMilliseconds
        options.jitterMilliseconds = self.jitterMilliseconds
        options.http2MaximumStreams = self.http2MaximumStreams
        options.channelPort = self.channelPort
        options.broadcastApps = self.broadcastApps.isEmpty ? [self.topic] : self.broadcastApps
        options.subscribers = self.subscribers
        options.channelLimit = self.channelLimit
        options.broadcastBudget = self.broadcastBudget
        options.storedBroadcastBudget = self.storedBroadcastBudget
        options.broadcastVerdictPath = self.broadcastVerdict
        options.broadcastExpectedPath = self.broadcastExpected
        let run: SimulationRun
        let paths: CertificateFactory.Paths
        var signingKey: DevelopmentSigningKey?
        do {
            // Development certificates, made when the folder has none; the simulator serves what it is given.
            paths = try CertificateFactory.ensure(in: self.certificates, topic: self.topic)
            if self.http2Port != nil {
                signingKey = try DevelopmentSigningKey.ensure(in: self.certificates)
            }
            run = try await SimulationRun.start(
                options,
                tls: try SimulatorConfiguration.TLS(paths: paths),
                providerKeys: signingKey.map { [$0.providerKey] } ?? []
            )
        } catch let error as SimulatorError {
            throw UserError(error.reason)
        } catch let error as CertificateFactoryError {
            throw UserError(error.reason)
        }
        let credentials = """
              CA        \(paths.ca)
              client    \(paths.client)
              key       \(paths.clientKey)
              (a client from another CA, refused: \(paths.foreignClient))

            """
        let tokens =
            signingKey.map {
                "\n            signed with \($0.path), --key-id \(DevelopmentSigningKey.keyID) "
                    + "--team-id \(DevelopmentSigningKey.teamID)"
            } ?? ""
        // Written straight to the file descriptor: scripts read the ports from a pipe or a file, where
        // print's buffer would hold them until exit.
        FileHandle.standardOutput.write(Data((run.banner(credentials: credentials, tokens: tokens) + "\n").utf8))
        let observability = try await self.observe.start(label: "salvo.simulate")
        let metrics = observability.factory.map { SimulatorMetrics(simulator: run.simulator, factory: $0) }
        metrics?.start()
        var control: SimulatorControlEndpoint?
        if let port = self.controlPort {
            let token: ControlToken
            let origin: String
            do {
                if let file = self.controlTokenFile {
                    token = try ControlToken.read(from: file)
                    origin = "token read from \(file)"
                } else {
                    token = ControlToken.random()
                    let file = paths.folder + "/" + ControlToken.fileName
                    try token.write(to: file)
                    origin = "token \(token.text) (in \(file))"
                }
            } catch {
                throw UserError("the control token: \(error)")
            }
            do {
                control = try await SimulatorControlEndpoint.start(
                    simulator: run.simulator,
                    host: self.controlHost,
                    port: port,
                    token: token
                )
            } catch {
                throw UserError("--control-port \(port) on \(self.controlHost): cannot listen: \(error)")
            }
            let address = self.controlHost.contains(":") ? "[\(self.controlHost)]" : self.controlHost
            FileHandle.standardOutput.write(
                Data("  control   http://\(address):\(control!.port), bearer \(origin)\n".utf8)
            )
        }
        await run.waitForTermination()
        await control?.stop()
        metrics?.stop()
        await observability.stop()
        print(try await run.finish())
    }
}
