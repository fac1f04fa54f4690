import APNSWire
import Foundation
import NIOSSL
import SalvoEngine
import SalvoHTTP2

/// Runs an HTTP/2 job the way `send` does for the binary interface: validate the input and say what is wrong
/// with it, send, then print the summary and write the report, the rejects and the unregistered tokens.
enum H2Send {
    /// The HTTP/2 options of `send`.
    struct Options {
        var host: String
        var port: Int
        var serverName: String?
        var ca: String?
        var authentication: APNSAuthentication
        var headers: APNSRequestHeaders
        var connections: Int
        var onUncertain: OnUncertain
        var unregistered: String?
    }

    static func run(
        files: [String],
        input: TokenSource.Options,
        payload: Payload,
        options: Options,
        output: OutputOptions,
        printSummary: Bool = true,
        log: (String) -> Void = { print($0) }
    ) async throws -> HTTP2JobResult {
        let (source, summary) = try BulkSend.validate(files: files, input: input, output: output, log: log)
        var client = HTTP2ClientConfiguration(
            host: options.host,
            port: options.port,
            authentication: options.authentication
        )
        client.serverName = options.serverName
        client.connections = options.connections
        if let ca = options.ca {
            do {
                client.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca))
            } catch {
                throw UserError("\(ca): cannot read PEM CA certificates: \(error)")
            }
        }
        var configuration = HTTP2JobConfiguration(client: client, headers: options.headers, payload: payload)
        configuration.onUncertain = options.onUncertain
        log(
            "sending \(summary.validRows) notifications of \(payload.byteCount) payload bytes over HTTP/2 to "
                + "\(options.host):\(options.port) over \(options.connections) connection(s)"
        )
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(configuration: configuration, source: source, summary: summary)
        } catch {
            throw UserError(error.message)
        }
        if printSummary { log(result.report.summary) }
        if result.notSent > 0 { log("not sent   \(result.notSent)") }
        if let stop = result.stopped { log("stopped    \(stop.message)") }
        if !result.unregistered.isEmpty {
            log("unregistered \(result.unregistered.count)\(options.unregistered.map { " (in \($0))" } ?? "")")
        }
        try BulkSend.writeOutputs(
            output,
            report: result.report,
            files: files,
            summary: summary,
            rejected: result.rejectedRows
        )
        if let path = options.unregistered {
            let csv =
                ([UnregisteredToken.csvHeader] + result.unregistered.map(\.csvLine)).joined(separator: "\n") + "\n"
            try BulkSend.write(Data(csv.utf8), to: path)
        }
        return result
    }
}
