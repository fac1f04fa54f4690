import NIOCore
import NIOPosix

/// Sits first in a gateway pipeline, below TLS, so that a planned reset can close the socket from
/// here: the close never passes the TLS handler (no close_notify) and SO_LINGER 0 makes the kernel
/// send a TCP RST. Confined to its channel's event loop.
final class ConnectionResetHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Resets the connection: no TLS close, no error response, a TCP RST.
    func reset() {
        guard let context = self.context else { return }
        guard let socket = context.channel as? SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
