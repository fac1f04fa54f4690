import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoData
import SalvoDevelopment
import SalvoHTTP2
import SalvoIO
import SalvoRows
import SalvoSend
import SalvoSimulator

/// `salvo demo`: a realistic bulk send to the embedded simulator, with the report and the simulator's
/// verdict side by side.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Send to the embedded simulator: the shipped sample, scaled up, with report and verdict side by side.",
        discussion: """
            Starts the APNs simulator with freshly made certificates and the demo fault plan (tokens it \
            refuses, shutdowns), sends data/tokens/sample.csv (which has bad rows on purpose) plus generated \
            tokens up to --tokens, then compares what the simulator received with what was sent. Exit status 0 \
            when the simulator's ledger proves nothing was lost, nothing was duplicated but rows the report \
            calls uncertain, and every refusal is accounted for.
            """
    )

    @Option(help: "Notifications in all: the sample's rows plus generated tokens.")
    var tokens: Int = 1_000_000

    @Option(help: "A folder with sample data to use instead of the shipped one (tokens/, payloads/, faults/).")
    var data: String?

    @Option(help: "The payload (default: the guide's example 2 from the data folder).")
    var payload: String?

    @Option(help: "The simulator's fault plan (default: faults/demo.json in the data folder).")
    var plan: String?

    @Option(name: .customLong("protocol"), help: "binary (the binary provider interface) or h2 (the HTTP/2 API).")
    var wireProtocol: WireProtocol = .binary

    @Flag(help: "Broadcast instead: create channels, send each a score update, show the fan-out, delete them.")
    var broadcast = false

    @Option(help: "With --broadcast: how many channels (1 to 10000), 25 simulated subscribers each.")
    var channels: Int = 20

    @Flag(
        help: """
            The service instead: start salvo serve on the simulator, post transactional notifications over HTTP             (at most 20000 of --tokens; some to unregistered tokens), and check the outcomes against the ledger.
            """
    )
    var serve = false

    @OptionGroup var delivery: DeliveryOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var observe: ObservabilityOptions
    @OptionGroup var progressOptions: ProgressOptions

    /// A file of the sample data: in `--data`, or shipped with the executable.
    private func dataFile(_ relative: String) -> String {
        if let data { return data + "/" + relative }
        return SalvoData.path(relative) ?? "data/" + relative
    }

    func validate() throws {
        guard self.tokens >= 0 && self.tokens <= 50_000_000 else {
            throw ValidationError("--tokens is 0 to 50000000 (got \(self.tokens))")
        }
    }

    func run() async throws {
        if self.broadcast {
            guard (1...10_000).contains(self.channels) else { throw ValidationError("--channels is 1 to 10000") }
            try await exitingOnUserError {
                if !(try await BroadcastDemo.run(channels: self.channels, subscribers: 25)) { throw ExitCode(1) }
            }
            return
        }
        if self.serve {
            try await exitingOnUserError {
                if !(try await ServeDemoRun.run(notifications: max(1, min(self.tokens, 20_000)))) { throw ExitCode(1) }
            }
            return
        }
        try await exitingOnUserError { try await self.demo() }
    }

    private func demo() async throws {
        let sample = self.dataFile("tokens/sample.csv")
        guard FileManager.default.fileExists(atPath: sample) else {
            throw UserError("\(sample): not found (the shipped sample is missing: pass --data FOLDER)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-demo-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }

        // The input: the sample as shipped, then generated tokens up to the total.
        let tokenFile = folder + "/tokens.csv"
        var text = try String(contentsOfFile: sample, encoding: .utf8)
        if !text.hasSuffix("\n") { text += "\n" }
        let sampleRows = text.split(whereSeparator: \.isNewline).count - 1
        var generator = TokenGenerator(seed: 0xDE30)
        var chunk = text
        let handle = try createFile(tokenFile)
        for _ in 0..<max(0, self.tokens - sampleRows) {
            chunk += generator.next().hexString
            chunk += ",,\n"
            if chunk.utf8.count >= 1 << 20 {
                handle.write(Data(chunk.utf8))
                chunk = ""
            }
        }
        handle.write(Data(chunk.utf8))
        try handle.close()

        // The simulator, with certificates made for this run.
        let topic = "com.example.salvo.demo"
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder + "/certificates", topic: topic)
        var simulatorConfiguration = SimulatorConfiguration(tls: .init(certificates))
        let planPath = self.plan.map(SalvoData.faultPlanPath) ?? self.dataFile("faults/demo.json")
        simulatorConfiguration.plan = try FaultPlan.load(contentsOf: planPath)
        simulatorConfiguration.maximumTokens = max(1 << 16, self.tokens + self.tokens / 4)
        simulatorConfiguration.expectedTokens = self.tokens
        let signingKey = try DevelopmentSigningKey.ensure(in: paths.folder)
        if self.wireProtocol == .h2 {
            simulatorConfiguration.http2 = HTTP2EndpointConfiguration(providerKeys: [signingKey.providerKey])
        }
        let simulator = try await Simulator.start(simulatorConfiguration)
        print(
            "simulator: gateway 127.0.0.1:\(simulator.gatewayPort), plan \"\(simulator.plan.name)\" (\(planPath)), "
                + "certificates in \(paths.folder)"
        )

        let input = TokenSource.Options()
        let report: JobReport
        do {
            report =
                self.wireProtocol == .h2
                ? try await self.sendHTTP2(
                    tokenFile: tokenFile,
                    port: simulator.http2Port!,
                    caFile: paths.ca,
                    signingKey: signingKey,
                    topic: topic
                )
                : try await self.sendBinary(tokenFile: tokenFile, port: simulator.gatewayPort, paths: paths)
        } catch {
            try? await simulator.shutdown()
            throw error
        }
        // What should have arrived: every valid row of the input.
        let expected = TokenSource(files: [tokenFile], options: input)
        try expected.validate()
        var valid: [DeviceToken] = []
        valid.reserveCapacity(self.tokens)
        while let rows = try expected.nextChunk(maximumRows: 65536) { valid += rows.map(\.token) }
        let verdict = simulator.verdict(expected: ExpectedTokens(valid))
        try await simulator.shutdown()

        print("")
        print(
            sideBySide(
                left: ["SENDER'S REPORT", ""] + report.summary.split(separator: "\n").map(String.init),
                right: ["SIMULATOR'S VERDICT", ""] + verdict.summary.split(separator: "\n").map(String.init)
            )
        )
        // Exactly once, except where the binary protocol cannot know: a connection that ends without an
        // error response leaves its rows uncertain, and resending them may deliver some twice.
        let reconciliation = Reconciliation(report: report, verdict: verdict)
        print("")
        print(reconciliation)
        if !reconciliation.agrees { throw ExitCode(1) }
    }
}

extension DemoCommand {
    fileprivate func sendBinary(
        tokenFile: String,
        port: Int,
        paths: CertificateFactory.Paths
    ) async throws -> JobReport {
        let credentials = GatewayCredentials(
            identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
            trustedCAFile: paths.ca
        )
        let template = try self.delivery.template(
            payloadFile: self.payload ?? self.dataFile("payloads/guide-example-2.json")
        )
        let configuration = try self.delivery.configuration(
            host: "127.0.0.1",
            port: port,
            serverName: nil,
            credentials: credentials,
            template: template
        )
        let request = SendRequest(files: [tokenFile], interface: .binary(configuration), outputs: self.output.outputs())
        let what = "\(template.frameByteCount) bytes"
        return try await SendConsole.run(
            request,
            what: what,
            display: ProgressDisplay(self.progressOptions.progress, quiet: self.output.quiet),
            printSummary: false
        ).report
    }

    fileprivate func sendHTTP2(
        tokenFile: String,
        port: Int,
        caFile: String,
        signingKey: DevelopmentSigningKey,
        topic: String
    ) async throws -> JobReport {
        let payloadFile = self.payload ?? self.dataFile("payloads/guide-example-2.json")
        let payload: Payload
        do {
            payload = try Payload(jsonBytes: try readFile(payloadFile))
        } catch let error as PayloadError {
            throw UserError("\(payloadFile): \(error.message)")
        }
        let token: ProviderToken
        do {
            let signer = try JWTSigner(
                p8File: signingKey.path,
                keyID: DevelopmentSigningKey.keyID,
                teamID: DevelopmentSigningKey.teamID
            )
            token = try ProviderToken(signer: signer)
        } catch {
            throw UserError(error.message)
        }
        let headers = try APNSRequestHeaders(
            pushType: .alert,
            expiration: try self.delivery.http2Expiration(),
            priority: self.delivery.resolvedPriority(for: .alert),
            topic: topic
        )
        print("sending with HTTP/2 token authentication (key \(DevelopmentSigningKey.keyID))")
        var client = HTTP2ClientConfiguration(host: "127.0.0.1", port: port, authentication: .token(token))
        client.serverName = "localhost"
        self.delivery.applyConnections(to: &client)
        client.trustRoots = try trustRoots(caFile: caFile)
        var configuration = HTTP2JobConfiguration(client: client, headers: headers, payload: payload)
        configuration.onUncertain = self.delivery.onUncertain
        let request = SendRequest(files: [tokenFile], interface: .http2(configuration), outputs: self.output.outputs())
        let what = "\(payload.byteCount) payload bytes over HTTP/2"
        return try await SendConsole.run(
            request,
            what: what,
            display: ProgressDisplay(self.progressOptions.progress, quiet: self.output.quiet),
            printSummary: false
        ).report
    }
}

/// Two blocks of lines next to each other.
func sideBySide(left: [String], right: [String], gap: Int = 4) -> String {
    let width = (left.map(\.count).max() ?? 0) + gap
    return (0..<max(left.count, right.count)).map { index in
        let l = index < left.count ? left[index] : ""
        let r = index < right.count ? right[index] : ""
        return l.padding(toLength: width, withPad: " ", startingAt: 0) + r
    }.joined(separator: "\n")
}
