import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import SalvoService
import ServiceLifecycle

/// Runs the API: Hummingbird's HTTP/1.1 server (with TLS when given a certificate) around `ServiceResponder`, until
/// `stop`, which shuts it down gracefully: the listener closes, requests in flight get their answers.
public final class ServiceServer: Sendable {
    /// The listener's TLS: a certificate chain and its key (PEM files).
    public struct TLSFiles: Sendable {
        public var certificate: String
        public var key: String

        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    private let group: ServiceGroup

    /// - Parameter onRunning: called with the port once the server listens (a port 0 asked for any).
    public init(
        responder: ServiceResponder,
        host: String,
        port: Int,
        tls: TLSFiles?,
        logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) throws {
        let server: HTTPServerBuilder
        if let tls {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate).map {
                NIOSSLCertificateSource.certificate($0)
            }
            let key = try NIOSSLPrivateKey(file: tls.key, format: .pem)
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain,
                privateKey: .privateKey(key)
            )
            server = try .tls(
                .http1(configuration: HTTP1Channel.Configuration(additionalChannelHandlers: [ContinueHandler()])),
                tlsConfiguration: configuration
            )
        } else {
            server = .http1(configuration: HTTP1Channel.Configuration(additionalChannelHandlers: [ContinueHandler()]))
        }
        let app = Application(
            responder: responder,
            server: server,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "salvo"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger
        )
        self.group = ServiceGroup(services: [app], logger: logger)
    }

    /// Serves until `stop` (or the task is cancelled).
    public func run() async throws {
        try await self.group.run()
    }

    /// Shuts the server down gracefully; `run` then returns.
    public func stop() async {
        await self.group.triggerGracefulShutdown()
    }
}
