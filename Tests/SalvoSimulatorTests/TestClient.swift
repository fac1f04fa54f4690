import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SalvoSimulator
import SalvoTestSupport

/// A small TLS client for the simulator's tests: connects with a client identity (or none), writes
/// bytes, and collects everything the server sends until it closes the connection, or until what came satisfies
/// `until` (and a short grace has passed), bounded by a timeout after which the client closes. It offers no ALPN;
/// with `cleartext` it speaks plain TCP.
enum TestClient {
    struct Outcome {
        /// Every byte received, in order.
        var received: [UInt8]
        /// The first error the connection saw (TLS alert, reset), if any.
        var error: (any Error)?
        /// True when the client closed on timeout rather than the server closing.
        var timedOut: Bool
    }

    static func exchange(
        port: Int,
        identity: CertificateFactory.Identity?,
        trusting caPEM: String,
        send: ByteBuffer,
        timeout: TimeAmount = .seconds(30),
        cleartext: Bool = false,
        until done: (@Sendable (_ received: [UInt8]) -> Bool)? = nil,
        grace: TimeAmount = .milliseconds(300)
    ) async throws -> Outcome {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)])
        configuration.certificateVerification = .noHostnameVerification
        if let identity {
            configuration.certificateChain = [
                .certificate(try NIOSSLCertificate(bytes: Array(identity.certificatePEM.utf8), format: .pem))
            ]
            configuration.privateKey = .privateKey(
                try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
            )
        }
        let context = try NIOSSLContext(configuration: configuration)
        let collector = NIOLockedValueBox(Outcome(received: [], error: nil, timedOut: false))
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if !cleartext {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: context, serverHostname: nil)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        Collector(outcome: collector, done: done, grace: grace)
                    )
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        let timer = channel.eventLoop.scheduleTask(in: timeout) {
            collector.withLockedValue { $0.timedOut = true }
            channel.close(promise: nil)
        }
        if send.readableBytes > 0 {
            channel.writeAndFlush(send, promise: nil)
        }
        try? await channel.closeFuture.get()
        timer.cancel()
        return collector.withLockedValue { $0 }
    }

    /// Collects what arrives; once `done` holds for it, closes `grace` later (frames sent right after the awaited
    /// ones still arrive).
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let outcome: NIOLockedValueBox<Outcome>
        let done: (@Sendable ([UInt8]) -> Bool)?
        let grace: TimeAmount
        private let closing = NIOLockedValueBox(false)

        init(outcome: NIOLockedValueBox<Outcome>, done: (@Sendable ([UInt8]) -> Bool)?, grace: TimeAmount) {
            self.outcome = outcome
            self.done = done
            self.grace = grace
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = self.unwrapInboundIn(data)
            let received = self.outcome.withLockedValue { outcome in
                outcome.received += buffer.readableBytesView
                return outcome.received
            }
            guard let done, done(received), !self.closing.withLockedValue({ $0 }) else { return }
            self.closing.withLockedValue { $0 = true }
            let channel = context.channel
            context.eventLoop.scheduleTask(in: self.grace) { channel.close(promise: nil) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.outcome.withLockedValue { if $0.error == nil { $0.error = error } }
            context.close(promise: nil)
        }
    }
}
