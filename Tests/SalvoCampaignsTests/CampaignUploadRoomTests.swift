import Foundation
import NIOCore
import NIOPosix
import SalvoCampaigns
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The room an uploaded audience may take: its limit, and the disk's room for it, its journal and results and the
/// store's reserve, decided from its `Content-Length` before its body is read and again as the body arrives.
@Suite struct CampaignUploadRoomValueTests {
    static let room = CampaignUploadRoom(limit: 100, reserve: 10)

    @Test func aDeclaredLengthIsCheckedAgainstTheLimitThenTheRoom() {
        #expect(Self.room.check(declared: 100, free: 210) == nil)
        #expect(Self.room.check(declared: 101, free: 1_000) == .overLimit(bytes: 101, limit: 100))
        // Twice the audience and the reserve.
        #expect(Self.room.check(declared: 100, free: 209) == .noRoom(needed: 210, free: 209))
        #expect(Self.room.check(declared: 0, free: 10) == nil)
        #expect(Self.room.check(declared: 0, free: 9) == .noRoom(needed: 10, free: 9))
    }

    @Test func bytesReceivedTakeTheirRoomAlreadyAndNeedAsMuchAgain() {
        // 60 written: 60 more for the journal and results, and the reserve.
        #expect(Self.room.check(received: 60, free: 70) == nil)
        #expect(Self.room.check(received: 60, free: 69) == .noRoom(needed: 70, free: 69))
        #expect(Self.room.check(received: 101, free: .max) == .overLimit(bytes: 101, limit: 100))
    }

    @Test func aHugeDeclaredLengthNeitherOverflowsNorPasses() {
        let room = CampaignUploadRoom(limit: .max, reserve: 64 << 20)
        #expect(room.check(declared: .max, free: .max - 1) == .noRoom(needed: .max, free: .max - 1))
        #expect(room.check(received: .max - 1, free: .max - 1) == .noRoom(needed: .max, free: .max - 1))
    }

    @Test func eachRefusalNamesTheAudienceAndItsStatus() {
        let over = CampaignUploadRoom.problem(.overLimit(bytes: 101, limit: 100))
        #expect(over.status == 413 && over.errors.first?.field == "audience")
        #expect(over.detail.contains("100") && over.detail.contains("--campaign-upload-limit"))
        let full = CampaignUploadRoom.problem(.noRoom(needed: 210, free: 209))
        #expect(full.status == 507 && full.errors.first?.field == "audience")
        #expect(full.detail.contains("209 bytes free") && full.detail.contains("needs 210"))
    }
}

/// On a service whose store is a small disk: an upload over the limit is refused 413 and one the disk has no room
/// for 507, from its declared length before a byte of its body is sent, or as a body of no declared length arrives;
/// none leaves a campaign, a file, or a send. An upload that fits is then taken.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2)))
struct CampaignUploadRoomTests {
    @Test(.enabled(if: SmallFilesystem.unavailable == nil, "\(SmallFilesystem.unavailable ?? "")"))
    func uploadsOverTheLimitOrTheDisksRoomAreRefusedAndLeaveNothing() async throws {
        let disk = try SmallFilesystem(bytes: 16 << 20)
        defer { disk.unmount() }
        let setup = try await CampaignSimulator.start()
        let service = try await CampaignService.start(
            simulator: setup,
            folder: disk.path,
            uploadRoom: CampaignUploadRoom(limit: 12 << 20, reserve: 4 << 20)
        )
        let settings = #"{"payload":{"aps":{"alert":"hello"}}}"#
        func head(_ framing: String) -> String {
            "POST /v1/campaigns HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(service.key)\r\n"
                + "Content-Type: text/csv\r\nSalvo-Campaign: \(settings)\r\n\(framing)\r\n\r\n"
        }
        // Declared, and asking to continue: the answer comes before any of the body is sent.
        let over = try await Self.exchange(service, head("Content-Length: \(13 << 20)\r\nExpect: 100-continue"))
        #expect(over.hasPrefix("HTTP/1.1 413"), "\(over)")
        let full = try await Self.exchange(service, head("Content-Length: \(8 << 20)\r\nExpect: 100-continue"))
        #expect(full.hasPrefix("HTTP/1.1 507"), "\(full)")
        // No length declared: 8 MiB in one chunk, refused once the room left is too small for what has come.
        let rows = audienceCSV(0..<(8 << 20) / 78)
        let chunked = try await Self.exchange(
            service,
            head("Transfer-Encoding: chunked"),
            body: String(rows.utf8.count, radix: 16) + "\r\n" + rows + "\r\n0\r\n\r\n"
        )
        #expect(chunked.hasPrefix("HTTP/1.1 507"), "\(chunked.prefix(200))")
        #expect(chunked.contains("free"), "\(chunked.suffix(400))")

        try await withCampaignClient { client in
            try await eventually("the refused uploads are gone", timeout: .seconds(20)) {
                (try? FileManager.default.contentsOfDirectory(atPath: disk.path + "/campaigns/incoming"))?.isEmpty
                    ?? false
            }
            let list = try await service.call(.GET, "/v1/campaigns", client: client)
            #expect(list.json["campaigns"] == .array([]), "\(list.text)")
            #expect(setup.simulator.ledger.snapshot().accepted == 0)
            // One that fits is taken and sent.
            let made = try await service.upload(audienceCSV(0..<50), settings: settings, client: client)
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await service.waitFor(id, state: "finished", client: client)
            #expect(setup.simulator.ledger.snapshot().accepted == 50)
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    /// Sends `head` (then `body`, from a task of its own, as far as the server reads it) on a connection of its own
    /// and returns the response: its head and what came after it, up to 64 KiB. Bounded: the connection is closed
    /// after 20 seconds, which ends the reads.
    static func exchange(_ service: CampaignService, _ head: String, body: String? = nil) async throws -> String {
        let port = try #require(Int(service.base.split(separator: ":").last ?? ""))
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let bound = channel.channel.eventLoop.scheduleTask(in: .seconds(20)) { channel.channel.close(promise: nil) }
        defer { bound.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: head))
            let sending = Task {
                // The server may answer and stop reading before the body's end: a failed write is expected then.
                if let body { try? await outbound.write(ByteBuffer(string: body)) }
            }
            defer { sending.cancel() }
            var reader = inbound.makeAsyncIterator()
            var received = ""
            var answer = try await ExpectContinueTests.readHead(&reader, into: &received)
            if answer.hasPrefix("HTTP/1.1 100") {
                answer = try await ExpectContinueTests.readHead(&reader, into: &received)
            }
            // The problem's body, as far as it has come with its head (the server may close after it).
            while received.utf8.count < 64 << 10, !received.contains("}") {
                guard let next = try? await reader.next() else { break }
                received += String(buffer: next)
            }
            return answer + received
        }
    }
}
