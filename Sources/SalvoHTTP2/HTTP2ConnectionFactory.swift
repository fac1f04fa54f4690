import NIOCore
import NIOPosix
import NIOSSL
import SalvoProxy

/// The one way the HTTP/2 side opens a connection to a gateway (a bulk send's connections, `salvo check`, the channel
/// and broadcast clients): the address, TCP and TLS settings, the proxy tunnel, ALPN and the server-name check,
/// decided here once.
///
/// The pipeline it builds: the proxy tunnel when there is a proxy (`ProxyTunnelHandler`, which holds the handlers
/// behind it until the tunnel is open), then TLS (`NIOSSLClientHandler` with SNI for a name), the server-name check
/// (`ServerNameCheckHandler`) whenever there is a name to hold the certificate to, the ALPN check when asked, and then
/// the caller's handlers. With a proxy the gateway's name is resolved by the proxy; without one, by
/// `RotatingResolver` when a turn is given.
package struct HTTP2ConnectionFactory: Sendable {
    package let host: String
    package let port: Int
    /// The name sent in SNI and the server's certificate is held to: `serverName`, or the host when it is a name;
    /// nil for an address without `serverName` (NIOSSL then checks the address).
    package let checkedName: String?
    /// Nil in cleartext mode.
    package let sslContext: NIOSSLContext?
    /// Whether the connection is closed when TLS did not negotiate `h2` (`ALPNCheckHandler`).
    package let checksALPN: Bool
    /// The TCP connect, and the tunnel after it, each.
    package let connectTimeout: Duration
    package let proxy: ProxyConfiguration?

    /// What a connection reports about its set-up, on its event loop.
    package struct Events: Sendable {
        /// A failure that no retry heals while the job has no working connection: the certificate does not name
        /// the server name, no `h2`, the proxy refused (credentials, a refused port).
        package var refused: @Sendable (String) -> Void
        /// Any other failure of the set-up (a proxy that closed or fell silent).
        package var failed: @Sendable (String) -> Void = { _ in }
        /// The tunnel is open, with the proxy's line (`proxy http://u@h:p: reached, …, tunnel to g:443 open`).
        package var tunnelOpen: @Sendable (String) -> Void = { _ in }

        package init(refused: @escaping @Sendable (String) -> Void) {
            self.refused = refused
        }
    }

    /// The factory of `configuration`'s connections; makes the TLS context they share.
    package init(_ configuration: HTTP2ClientConfiguration, checksALPN: Bool? = nil) throws(HTTP2ClientError) {
        self.host = configuration.host
        self.port = configuration.port
        self.checkedName =
            configuration.serverName ?? (Self.isIPAddress(configuration.host) ? nil : configuration.host)
        self.sslContext = try configuration.makeSSLContext()
        self.checksALPN = checksALPN ?? configuration.offersALPN
        self.connectTimeout = configuration.connectTimeout
        self.proxy = configuration.proxy
    }

    /// `host:port` of the gateway.
    package var address: String { "\(self.host):\(self.port)" }

    /// Connects on `eventLoop` and builds the pipeline; `addHandlers` adds the caller's handlers after the checks
    /// (it runs on the loop, in the channel initializer). The future succeeds when TCP is connected (to the proxy,
    /// with one): the tunnel and the TLS handshake follow, and their failures come through `events` and close the
    /// channel.
    ///
    /// - Parameter addressTurn: which of the gateway's addresses to try first (`RotatingResolver`); nil for NIO's
    ///   own resolution.
    package func connect(
        on eventLoop: any EventLoop,
        addressTurn: Int? = nil,
        events: Events,
        addHandlers: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) -> EventLoopFuture<any Channel> {
        let factory = self
        var bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(self.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        if let addressTurn {
            bootstrap = bootstrap.resolver(RotatingResolver(loop: eventLoop, turn: addressTurn))
        }
        bootstrap = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                if let proxy = factory.proxy {
                    try sync.addHandler(QuickAckHandler())
                    try sync.addHandler(
                        ProxyTunnelHandler(
                            handshake: ProxyHandshake(proxy: proxy, host: factory.host, port: factory.port),
                            timeout: factory.connectTimeout,
                            onOpen: events.tunnelOpen,
                            onFailure: { failure in
                                switch failure.kind {
                                case .timeout, .closed: events.failed(failure.message)
                                default: events.refused(failure.message)
                                }
                            }
                        )
                    )
                }
                if let sslContext = factory.sslContext {
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: factory.checkedName))
                    if let name = factory.checkedName {
                        try sync.addHandler(ServerNameCheckHandler(serverName: name, onFailure: events.refused))
                    }
                    // Without an offer, a server cannot choose `h2` with ALPN: HTTP/2 is then spoken by prior
                    // knowledge, and only a server that does not speak it fails (at the HTTP/2 preface).
                    if factory.checksALPN {
                        try sync.addHandler(ALPNCheckHandler(onFailure: events.refused))
                    }
                }
                try addHandlers(sync)
            }
        }
        if let proxy = self.proxy {
            return bootstrap.connect(host: proxy.host, port: proxy.port)
        }
        return bootstrap.connect(host: self.host, port: self.port)
    }

    /// What a failed `connect` means: the message (naming the proxy when the connect was to the proxy) and, when
    /// no retry heals it, why.
    package func describe(connectError error: any Error) -> (message: String, hopeless: String?) {
        let cause = HTTP2ConnectFailure.hopeless(connectError: error)
        if let proxy = self.proxy {
            let what = "the proxy \(proxy) cannot be reached: \(cause ?? "\(error)")"
            return ("cannot connect to \(self.address): \(what)", cause == nil ? nil : what)
        }
        return ("cannot connect to \(self.address): \(cause ?? "\(error)")", cause)
    }

    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
