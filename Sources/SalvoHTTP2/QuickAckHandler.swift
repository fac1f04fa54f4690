import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Acknowledges what the connection read at once (`TCP_QUICKACK` after every read), on connections through a proxy.
///
/// A proxy that relays with Nagle's algorithm on (tinyproxy never sets `TCP_NODELAY`) holds each small answer it
/// passes back until the last one is acknowledged, and Linux delays that acknowledgement by up to 40 ms: a job through
/// such a proxy then moves at the pace of the acknowledgement timer (2.4 times as long as direct; docs/benchmarks.md,
/// "Through a proxy"). Linux leaves quick-acknowledgement mode by itself, so the option is set again after each read
/// batch: one system call per batch of reads, on proxied connections only. Written by hand: NIO sets socket options
/// but has no handler that keeps one set.
final class QuickAckHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private static let option = ChannelOptions.Types.SocketOption(
        level: NIOBSDSocket.OptionLevel.tcp,
        name: NIOBSDSocket.Option(rawValue: TCP_QUICKACK)
    )

    func channelActive(context: ChannelHandlerContext) {
        self.acknowledgeAtOnce(context: context)
        context.fireChannelActive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.acknowledgeAtOnce(context: context)
        context.fireChannelReadComplete()
    }

    private func acknowledgeAtOnce(context: ChannelHandlerContext) {
        // A socket that refuses the option (not TCP, or closed) is left as it is: acknowledgements only come later.
        try? context.channel.syncOptions?.setOption(Self.option, value: 1)
    }
}
