import NIOCore
import NIOEmbedded
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The simulator's distance: bytes held the latency in each direction, in order whatever the jitter, with the
/// time of an embedded event loop.
@Suite(.tags(.pure), .runs(.pure)) struct LatencyHandlerTests {
    static func channel(latency: Int, jitter: Int = 0) throws -> EmbeddedChannel {
        let handler = LatencyHandler(
            latencyMilliseconds: latency,
            jitterMilliseconds: jitter,
            random: SeededGenerator(seed: 7)
        )
        return EmbeddedChannel(handler: handler)
    }

    @Test func readsAndWritesArriveOneLatencyLater() throws {
        let channel = try Self.channel(latency: 25)
        try channel.writeInbound(ByteBuffer(string: "in"))
        // Not writeOutbound: it waits for the write, which the handler holds.
        channel.writeAndFlush(ByteBuffer(string: "out"), promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(24))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "in"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "out"))
        _ = try channel.finish()
    }

    @Test func jitterSpreadsTheDelaysButKeepsTheOrder() throws {
        let channel = try Self.channel(latency: 10, jitter: 30)
        var arrivals: [Int] = []
        for n in 0..<50 {
            channel.writeAndFlush(ByteBuffer(integer: UInt32(n)), promise: nil)
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
                arrivals.append(Int(bytes.readInteger(as: UInt32.self)!))
            }
        }
        #expect(arrivals.count < 50, "nothing is due at once")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(41))
        while var bytes = try channel.readOutbound(as: ByteBuffer.self) {
            arrivals.append(Int(bytes.readInteger(as: UInt32.self)!))
        }
        #expect(arrivals == Array(0..<50))
        _ = try channel.finish()
    }

    /// Records the events that reach it, in order.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var events: [String] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.events.append(String(buffer: self.unwrapInboundIn(data)))
        }

        func channelReadComplete(context: ChannelHandlerContext) { self.events.append("complete") }

        func channelInactive(context: ChannelHandlerContext) { self.events.append("inactive") }
    }

    @Test func theEndOfTheConnectionBringsTheHeldBytesAtOnceThenTheEnd() throws {
        let channel = try Self.channel(latency: 50)
        let recorder = Recorder()
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.writeInbound(ByteBuffer(string: "first"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(10))
        try channel.writeInbound(ByteBuffer(string: "last words"))
        #expect(recorder.events.isEmpty)
        // NIO removes the handlers of a closed channel on the next pass of the loop: nothing may wait for later.
        channel.pipeline.fireChannelInactive()
        #expect(recorder.events == ["first", "complete", "last words", "complete", "inactive"])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(recorder.events.count == 5, "nothing twice")
    }

    @Test func writesHeldWhenTheHandlerGoesFailAndACloseHeldBehindThemCompletes() throws {
        let handler = LatencyHandler(latencyMilliseconds: 50, jitterMilliseconds: 0, random: SeededGenerator(seed: 7))
        let channel = EmbeddedChannel(handler: handler)
        let written = channel.eventLoop.makePromise(of: Void.self)
        let closed = channel.eventLoop.makePromise(of: Void.self)
        let unflushed = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(string: "on its way"), promise: written)
        channel.close(promise: closed)
        channel.write(ByteBuffer(string: "never flushed"), promise: unflushed)
        // The peer goes: the channel closes beneath the handler, and its handlers are removed on the next pass.
        try channel.pipeline.syncOperations.context(handler: handler).close(promise: nil)
        channel.embeddedEventLoop.run()
        #expect(throws: ChannelError.ioOnClosedChannel) { try written.futureResult.wait() }
        #expect(throws: ChannelError.ioOnClosedChannel) { try unflushed.futureResult.wait() }
        try closed.futureResult.wait()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try? channel.finish()
    }
}
