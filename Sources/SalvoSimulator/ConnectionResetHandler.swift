import NIOCore
import NIOPosix

/// Sits first in a gateway pipeline, below TLS, so that a planned reset can close the socket from
/// here: the close never passes the TLS handler (no close_notify) and SO_LINGER 0 makes the kernel
/// send a TCP RST. Confined to its channel's event loop.
///
/// A RST discards what is still queued to send: answers written before the reset would be lost though
/// the ledger recorded them. So the reset waits for the last write to reach the socket, then (on Linux)
/// for the peer to acknowledge every segment sent, for at most `maximumDrainWait`.
final class ConnectionResetHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny

    /// The longest a reset waits for the peer's acknowledgements.
    static let maximumDrainWait = TimeAmount.milliseconds(500)
    /// How often it looks.
    static let drainPoll = TimeAmount.milliseconds(1)

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Whether a reset waits on: the peer has not acknowledged `unacked` segments, and the reset has waited less
    /// than `maximumDrainWait`.
    static func waitsForAcknowledgement(unacked: UInt32, waited: TimeAmount) -> Bool {
        unacked > 0 && waited < Self.maximumDrainWait
    }

    /// Resets the connection now: no TLS close, no error response, a TCP RST.
    func reset() {
        guard let context = self.context else { return }
        guard let socket = context.channel as? SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        self.resetNow(context: context, socket: socket)
    }

    /// Resets the connection once `written` (the last write of answers, nil when none) completes and the
    /// peer has acknowledged what was sent: no TLS close, no error response, a TCP RST.
    func reset(after written: EventLoopFuture<Void>?) {
        guard let context = self.context else { return }
        guard let written else {
            self.drain(context: context, since: .now())
            return
        }
        // Failed or not, the write is over: nothing more of it will reach the socket.
        written.hop(to: context.eventLoop).assumeIsolated().whenComplete { _ in
            self.drain(context: context, since: .now())
        }
    }

    private func drain(context: ChannelHandlerContext, since start: NIODeadline) {
        guard let socket = context.channel as? SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        #if os(Linux)
        socket.getTCPInfo().hop(to: context.eventLoop).assumeIsolated().whenComplete { result in
            let unacked = (try? result.get())?.tcpi_unacked ?? 0
            if Self.waitsForAcknowledgement(unacked: unacked, waited: .now() - start) {
                context.eventLoop.assumeIsolated().scheduleTask(in: Self.drainPoll) {
                    self.drain(context: context, since: start)
                }
            } else {
                self.resetNow(context: context, socket: socket)
            }
        }
        #else
        self.resetNow(context: context, socket: socket)
        #endif
    }

    private func resetNow(context: ChannelHandlerContext, socket: any SocketOptionProvider) {
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
