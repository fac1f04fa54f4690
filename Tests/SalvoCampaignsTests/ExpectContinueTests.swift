import NIOCore
import NIOPosix
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// An upload that asks `Expect: 100-continue` (as curl does for a body over 1 MiB) gets its `100 Continue` before it
/// sends a byte of its body, then the campaign's 201: the client sends the body only once the 100 came, so a service
/// that did not answer it fails here (the read of the 100 is bounded) instead of making every such upload wait.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2)))
struct ExpectContinueTests {
    @Test func anUploadAskingToContinueIsToldToBeforeItsBodyGoes() async throws {
        let setup = try await CampaignSimulator.start()
        let service = try await CampaignService.start(simulator: setup, folder: try campaignFolder("expect-continue"))
        let body = audienceCSV(0..<50)
        let settings = #"{"payload":{"aps":{"alert":"hello"}}}"#
        let head =
            "POST /v1/campaigns HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(service.key)\r\n"
            + "Content-Type: text/csv\r\nSalvo-Campaign: \(settings)\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Expect: 100-continue\r\n\r\n"
        let port = try #require(Int(service.base.split(separator: ":").last ?? ""))
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        // Every read is bounded: the connection is closed after 10 seconds, which ends the reads.
        let bound = channel.channel.eventLoop.scheduleTask(in: .seconds(10)) { channel.channel.close(promise: nil) }
        defer { bound.cancel() }
        let (continued, final) = try await channel.executeThenClose { inbound, outbound in
            var reader = inbound.makeAsyncIterator()
            var received = ""
            try await outbound.write(ByteBuffer(string: head))
            let continued = try await Self.readHead(&reader, into: &received)
            try await outbound.write(ByteBuffer(string: body))
            let final = try await Self.readHead(&reader, into: &received)
            return (continued, final)
        }
        #expect(continued.hasPrefix("HTTP/1.1 100 Continue"), "\(continued)")
        #expect(final.hasPrefix("HTTP/1.1 201"), "\(final)")
        await service.stop()
        try await setup.simulator.shutdown()
    }

    /// The next response head (through its blank line); what follows it stays in `received`.
    static func readHead(
        _ reader: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        into received: inout String
    ) async throws -> String {
        while !received.contains("\r\n\r\n") {
            guard let next = try await reader.next() else { throw HeadMissing(received: received) }
            received += String(buffer: next)
        }
        let end = received.range(of: "\r\n\r\n")!
        let head = String(received[..<end.upperBound])
        received = String(received[end.upperBound...])
        return head
    }

    struct HeadMissing: Error {
        var received: String
    }
}
