import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A server on 127.0.0.1, on any free port, with event loops of its own: the set-up and tear-down the loopback
/// HTTP/2 test server and the benchmark sink share.
///
/// Thread-safe; `stop` may be called more than once.
public final class LoopbackListener: Sendable {
    public let port: Int
    private let channel: any Channel
    /// The server's event loops (for tests that watch how late they run).
    public let group: MultiThreadedEventLoopGroup
    private let stopped = NIOLockedValueBox(false)

    /// Binds with `threads` event loops; `childInitializer` sets up each accepted connection's pipeline.
    public init(
        threads: Int,
        childInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        do {
            self.channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer(childInitializer)
                .bind(host: "127.0.0.1", port: 0)
                .get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        self.group = group
        self.port = self.channel.localAddress?.port ?? 0
    }

    /// A server's TLS for HTTP/2: TLS 1.2 or later, ALPN `h2`; with `clientTrustRoots`, client certificates are
    /// asked for and checked against them.
    public static func http2TLS(
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientTrustRoots: NIOSSLTrustRoots? = nil
    ) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        tls.applicationProtocols = ["h2"]
        tls.minimumTLSVersion = .tlsv12
        if let clientTrustRoots {
            tls.trustRoots = clientTrustRoots
            tls.certificateVerification = .noHostnameVerification
        }
        return try NIOSSLContext(configuration: tls)
    }

    /// Closes the listener and every connection; a second call does nothing.
    public func stop() async {
        let first = self.stopped.withLockedValue { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? await self.channel.close()
        try? await self.group.shutdownGracefully()
    }
}
