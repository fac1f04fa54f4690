import APNSWire
import ArgumentParser
import SalvoEngine
import SalvoIO

/// `salvo send TOKENS.csv --payload FILE.json --gateway HOST:PORT --cert … --key …`
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one payload to every token of CSV files over the binary provider interface.",
        discussion: """
            Exit status: 0 when every row was valid and delivered; 1 when some row was refused (bad input, \
            rejected by the gateway, expired or uncertain); 64 for wrong arguments; 3 when the job could not \
            run (files, credentials, gateway unreachable).
            """
    )

    @Argument(help: "CSV files of device tokens.")
    var tokens: [String]

    @Option(help: "The JSON payload file.")
    var payload: String

    @Option(help: "HOST:PORT, or `production` / `sandbox` for Apple's gateways.")
    var gateway: String

    @Option(help: "The client certificate (PEM).")
    var cert: String?

    @Option(help: "The client certificate's private key (PEM).")
    var key: String?

    @Option(help: "The client certificate and key as one PKCS#12 file (instead of --cert and --key).")
    var pkcs12: String?

    @Option(help: "The passphrase of the key or the PKCS#12 file.")
    var passphrase: String?

    @Option(help: "CA certificates (PEM) to trust for the gateway (default: the system's).")
    var ca: String?

    @Option(help: "The name the gateway's certificate must carry (default: the gateway host).")
    var serverName: String?

    @OptionGroup var input: InputOptions
    @OptionGroup var delivery: DeliveryOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard !self.tokens.isEmpty else { throw ValidationError("name at least one token file") }
        guard (self.cert != nil && self.key != nil) != (self.pkcs12 != nil) else {
            throw ValidationError("give --cert and --key, or --pkcs12")
        }
        _ = try Gateway(self.gateway)
    }

    func run() async throws {
        try await exitingOnUserError { try await self.send() }
    }

    private func send() async throws {
        let gateway = try Gateway(self.gateway)
        let template = try self.delivery.template(payloadFile: self.payload)
        let credentials: TLSCredentials =
            if let pkcs12 { .pkcs12(file: pkcs12, passphrase: self.passphrase) } else {
                .pem(certificateChainFile: self.cert!, privateKeyFile: self.key!, passphrase: self.passphrase)
            }
        let tls: TLSContext
        do {
            tls = try TLSContext(configuration: .client(credentials: credentials, trustedCAFile: self.ca))
        } catch let error as SalvoIOError {
            throw UserError(error.message)
        }
        let configuration = self.delivery.configuration(
            host: gateway.host,
            port: gateway.port,
            serverName: self.serverName,
            tls: tls,
            template: template
        )
        let result = try await BulkSend.run(
            files: self.tokens,
            input: self.input.tokenSourceOptions,
            configuration: configuration,
            output: self.output
        )
        if !result.report.isComplete { throw ExitCode(1) }
    }
}

/// A gateway address: HOST:PORT, `[IPv6]:PORT`, or Apple's named gateways.
struct Gateway {
    var host: String
    var port: Int

    init(_ text: String) throws {
        switch text {
        case "production":
            (self.host, self.port) = ("gateway.push.apple.com", 2195)
        case "sandbox":
            (self.host, self.port) = ("gateway.sandbox.push.apple.com", 2195)
        default:
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
                (1...65535).contains(port)
            else {
                throw ValidationError("--gateway is HOST:PORT, production or sandbox (got \(text))")
            }
            var host = String(text[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw ValidationError("--gateway needs a host (got \(text))") }
            (self.host, self.port) = (host, port)
        }
    }
}
