import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Connects to an HTTP/2 gateway as a job does (`HTTP2ConnectionFactory`: the proxy tunnel, TLS 1.2+, ALPN `h2`, the
/// client certificate when there is one, the server name checked), completes the handshake, and closes without
/// sending a request: whether a send could connect. Thin: the decisions are NIOSSL's and the factory's.
public enum HTTP2Handshake {
    /// Connects, shakes hands, checks that `h2` was negotiated, waits `settle` for a refusal of the client
    /// certificate (TLS 1.3 sends it after the client's side finished), closes.
    ///
    /// - Returns: what was reached (`TLS handshake with api.push.apple.com:443 passed, ALPN h2`), after a line of the
    ///   proxy's when there is one (`proxy http://u@h:3128: reached, authenticated (Basic), tunnel to … open`).
    /// - Throws: `HTTP2ClientError(.credentials)` for credentials that do not load, `.connection` for a gateway
    ///   that cannot be reached or a handshake either side refuses, `.protocolNegotiation` without `h2`.
    public static func check(
        _ configuration: HTTP2ClientConfiguration,
        timeout: Duration = .seconds(10),
        settle: Duration = .milliseconds(300)
    ) async throws(HTTP2ClientError) -> String {
        var configuration = configuration
        configuration.connectTimeout = timeout
        try configuration.validate()
        guard !configuration.cleartext else {
            throw HTTP2ClientError(.configuration, "cleartext HTTP/2 has no TLS handshake to check")
        }
        // The ALPN check is the watcher's, which names it.
        let factory = try HTTP2ConnectionFactory(configuration, checksALPN: false)
        let address = factory.address
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let outcome = eventLoop.makePromise(of: String.self)
        let tunnel = NIOLockedValueBox<String?>(nil)
        let offersALPN = configuration.offersALPN
        var events = HTTP2ConnectionFactory.Events { message in
            outcome.fail(HTTP2ClientError(.connection, "\(address): \(message)"))
        }
        events.failed = events.refused
        events.tunnelOpen = { line in tunnel.withLockedValue { $0 = line } }
        let connecting = factory.connect(on: eventLoop, events: events) { sync in
            try sync.addHandler(
                HandshakeWatcher(address: address, requireH2: offersALPN, settle: settle, outcome: outcome)
            )
        }
        let channel: any Channel
        do {
            channel = try await connecting.get()
        } catch {
            outcome.fail(error)
            throw HTTP2ClientError(.connection, factory.describe(connectError: error).message)
        }
        // Every path ends: the watcher's deadline covers a peer that never finishes the handshake.
        let deadline = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            outcome.fail(HTTP2ClientError(.connection, "\(address): no TLS handshake within \(timeout)"))
        }
        defer { deadline.cancel() }
        do {
            let text = try await outcome.futureResult.get()
            try? await channel.close()
            // The proxy's line first: it was reached, and the tunnel opened, before the handshake.
            return (tunnel.withLockedValue { $0 }.map { "\($0)\n" } ?? "") + text
        } catch {
            try? await channel.close()
            if let error = error as? HTTP2ClientError { throw error }
            throw HTTP2ClientError(.connection, "\(address): \(error)")
        }
    }
}

/// Completes `outcome` when the handshake has passed (and the connection is still open `settle` later), or fails
/// it with the handshake's error or an early close. Confined to its channel's event loop.
private final class HandshakeWatcher: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let address: String
    private let requireH2: Bool
    private let settle: Duration
    private let outcome: EventLoopPromise<String>

    init(address: String, requireH2: Bool, settle: Duration, outcome: EventLoopPromise<String>) {
        self.address = address
        self.requireH2 = requireH2
        self.settle = settle
        self.outcome = outcome
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if self.requireH2 && negotiated != "h2" {
                self.outcome.fail(
                    HTTP2ClientError(
                        .protocolNegotiation,
                        "\(self.address) did not negotiate HTTP/2 with ALPN (got \(negotiated ?? "nothing"))"
                    )
                )
            } else {
                let text = "TLS handshake with \(self.address) passed" + (negotiated.map { ", ALPN \($0)" } ?? "")
                let outcome = self.outcome
                context.eventLoop.scheduleTask(in: TimeAmount(self.settle)) { outcome.succeed(text) }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The server's SETTINGS: nothing to answer, the connection closes after the check.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let cause = HTTP2ConnectFailure.hopeless(connectionError: error) ?? "\(error)"
        self.outcome.fail(HTTP2ClientError(.connection, "\(self.address): \(cause)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.outcome.fail(HTTP2ClientError(.connection, "\(self.address) closed the connection during the check"))
        context.fireChannelInactive()
    }
}
