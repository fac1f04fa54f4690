import APNSWire
import NIOCore
import NIOSSL
import NIOTLS

/// One feedback-service connection: once the TLS handshake names the topic, writes that topic's
/// `timestamp|length|token` tuples (clearing the list) and closes. Reads nothing: the service
/// takes no request. Confined to its channel's event loop.
final class FeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let store: FeedbackStore
    private let ledger: DeliveryLedger
    private var served = false

    init(store: FeedbackStore, ledger: DeliveryLedger) {
        self.store = store
        self.ledger = ledger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent, !self.served {
            self.served = true
            let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            let topic = PeerTopic(peerCertificate: handler?.peerCertificate).topic
            let tuples = topic.map { self.store.take(topic: $0) } ?? []
            self.ledger.recordFeedback(tuples: tuples.count)
            var out = context.channel.allocator.buffer(capacity: tuples.count * 38)
            for tuple in tuples { tuple.write(to: &out) }
            context.writeAndFlush(self.wrapOutboundOut(out)).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The feedback service takes no input; anything sent is ignored.
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if !self.served && error is NIOSSLError { self.ledger.recordConnectionRefused(reason: "tls") }
        context.close(promise: nil)
    }
}
