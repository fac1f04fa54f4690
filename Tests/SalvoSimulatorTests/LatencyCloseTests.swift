import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The simulator's distance on a real connection whose client writes and goes at once: NIO closes the gateway's
/// channel when the peer's FIN arrives and removes its handlers on the next pass of the loop, while the latency still
/// holds the last bytes. They must reach the gateway and its ledger all the same.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct LatencyCloseTests {
    /// Sits next to the socket: a close started from its context goes to the socket without passing TLS, so the
    /// connection ends with a bare FIN (no close_notify to wait for), as when a client process exits.
    final class AbruptCloser: ChannelOutboundHandler, Sendable {
        typealias OutboundIn = ByteBuffer
    }

    /// Completes `promise` when the TLS handshake is done.
    final class HandshakeWaiter: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let promise: EventLoopPromise<Void>

        init(promise: EventLoopPromise<Void>) { self.promise = promise }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event { self.promise.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.promise.fail(ChannelError.ioOnClosedChannel)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {}
    }

    @Test func framesWrittenJustBeforeTheClientGoesReachTheLedger() async throws {
        var plan = FaultPlan()
        plan.latencyMilliseconds = 150
        try await Harness.run(plan: plan) { harness in
            let tokens = (0..<40).map { TestTokens.token(UInt32(500 + $0)) }
            let frames = Frames.joined(tokens.enumerated().map { Frames.valid($1, identifier: UInt32($0 + 1)) })
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .certificates([
                try NIOSSLCertificate(bytes: Array(harness.certificates.ca.certificatePEM.utf8), format: .pem)
            ])
            configuration.certificateVerification = .noHostnameVerification
            configuration.certificateChain = [
                .certificate(try NIOSSLCertificate(bytes: Array(harness.client.certificatePEM.utf8), format: .pem))
            ]
            configuration.privateKey = .privateKey(
                try NIOSSLPrivateKey(bytes: Array(harness.client.privateKeyPEM.utf8), format: .pem)
            )
            let context = try NIOSSLContext(configuration: configuration)
            let closer = AbruptCloser()
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: harness.simulator.gatewayPort)
                .get()
            let handshake = channel.eventLoop.makePromise(of: Void.self)
            try await channel.eventLoop.submit {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(closer)
                try sync.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                try sync.addHandler(HandshakeWaiter(promise: handshake))
            }.get()
            try await handshake.futureResult.get()
            // Written (sealed and handed to the socket), then gone at once: the gateway's latency still holds them.
            try await channel.writeAndFlush(frames).get()
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.context(handler: closer).close(promise: nil)
            }.get()
            try? await channel.closeFuture.get()

            let ledger = harness.simulator.ledger
            try await eventually("every token counted accepted", timeout: .seconds(5)) {
                ledger.snapshot().accepted == tokens.count
            }
            #expect(ledger.snapshot().accepted == tokens.count)
            #expect(tokens.allSatisfy { ledger.record(for: $0)?.count == 1 })
        }
    }
}
