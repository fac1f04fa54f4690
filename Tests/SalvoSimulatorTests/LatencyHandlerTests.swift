import NIOCore
import NIOEmbedded
import Testing

@testable import SalvoSimulator

/// The simulator's distance: bytes held the latency in each direction, in order whatever the jitter, with the
/// time of an embedded event loop.
@Suite struct LatencyHandlerTests {
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

    @Test func theEndOfTheConnectionComesAfterTheBytesBeforeIt() throws {
        let channel = try Self.channel(latency: 5)
        try channel.writeInbound(ByteBuffer(string: "last words"))
        channel.pipeline.fireChannelInactive()
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(5))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "last words"))
    }
}
