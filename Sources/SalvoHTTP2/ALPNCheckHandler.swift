import NIOCore
import NIOTLS

/// Closes the connection when the TLS handshake did not negotiate `h2` (APNs speaks nothing else). Only in the
/// pipeline when the client offered ALPN.
///
/// Confined to its channel's event loop.
final class ALPNCheckHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    private let onFailure: (String) -> Void

    init(onFailure: @escaping (String) -> Void) {
        self.onFailure = onFailure
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if negotiated != "h2" {
                self.onFailure("the server did not negotiate HTTP/2 with ALPN (got \(negotiated ?? "nothing"))")
                context.close(promise: nil)
                return
            }
            // Passed on before leaving the pipeline: a removed handler's context no longer reaches the next one.
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
