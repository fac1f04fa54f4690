import APNSWire
import Foundation
import SalvoBroadcast
import SalvoRows
import SalvoTestTraits
import Testing

/// The broadcast request of each row, and the refusals checked before sending (pure).
@Suite(.tags(.pure), .runs(.pure)) struct BroadcastRequestTests {
    static let template = #"""
        {"aps":{"timestamp":"{{$now}}","event":"update","content-state":{"home":"{{home:int}}","away":"{{away:int}}","clock":"{{clock}}"}}}
        """#

    func builder(
        expiration: Int64 = 0,
        priority: Int = 10,
        template: String = template
    ) throws -> BroadcastRequestBuilder {
        try BroadcastRequestBuilder(
            bundleID: "com.example.scores",
            template: try PayloadTemplate(json: Array(template.utf8), file: "update.json"),
            header: ["name", "channel_id", "policy", "home", "away", "clock"],
            expiration: expiration,
            priority: priority
        )
    }

    @Test func aRowBecomesOneBroadcastWithTheRequiredHeaders() throws {
        let builder = try self.builder()
        let fields = ["final", "YQ==", "none", "2", "1", "90'"]
        let request = try builder.request(
            fields: fields,
            channelID: "YQ==",
            policy: MessageStoragePolicy.none,
            now: 1_790_000_000
        ).get()
        #expect(request.method == "POST")
        #expect(request.path == "/4/broadcasts/apps/com.example.scores")
        #expect(request.header("apns-channel-id") == "YQ==")
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-expiration") == "0")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-topic") == nil)
        let body = String(decoding: request.body, as: UTF8.self)
        #expect(
            body
                == #"{"aps":{"timestamp":1790000000,"event":"update","content-state":{"home":2,"away":1,"clock":"90'"}}}"#
        )
    }

    @Test func aNoStorageChannelRefusesANonzeroExpirationBeforeSending() throws {
        let builder = try self.builder(expiration: 1_790_003_600)
        let fields = ["final", "YQ==", "none", "2", "1", "90'"]
        let refused = builder.request(
            fields: fields,
            channelID: "YQ==",
            policy: MessageStoragePolicy.none,
            now: 1_790_000_000
        )
        #expect(refused.error?.reason == "BadExpirationDate")
        // A stored channel takes it.
        let stored = try builder.request(fields: fields, channelID: "YQ==", policy: .mostRecent, now: 1_790_000_000)
            .get()
        #expect(stored.header("apns-expiration") == "1790003600")
    }

    @Test func badRowsAreRefusedWithTheReasonAPNsWouldGive() throws {
        let builder = try self.builder()
        let bad = builder.request(fields: ["x", "!!", "none", "1", "1", "c"], channelID: "!!", policy: nil, now: 1)
        #expect(bad.error?.reason == "BadChannelId")
        let notInteger = builder.request(
            fields: ["x", "YQ==", "none", "one", "1", "c"],
            channelID: "YQ==",
            policy: nil,
            now: 1
        )
        #expect(notInteger.error?.reason == "BadRequestPayload")
        let huge = String(repeating: "x", count: 5200)
        let large = builder.request(
            fields: ["x", "YQ==", "none", "1", "1", huge],
            channelID: "YQ==",
            policy: nil,
            now: 1
        )
        #expect(large.error?.reason == "PayloadTooLarge")
    }

    @Test func theTemplateAndHeadersAreCheckedOnce() throws {
        #expect(throws: BroadcastRowError.self) { try self.builder(priority: 7) }
        #expect(throws: BroadcastRowError.self) {
            try self.builder(template: #"{"aps":{"event":"update","content-state":{"x":"{{nowhere}}"}}}"#)
        }
        let start = try self.builder(template: #"{"aps":{"event":"start","timestamp":1,"content-state":{}}}"#)
        let refused = start.request(fields: ["x", "YQ=="], channelID: "YQ==", policy: nil, now: 1)
        #expect(refused.error?.detail.contains("cannot start") == true)
        #expect(BroadcastRequestBuilder.check(Array(#"{"aps":{"event":"end","timestamp":5}}"#.utf8)) == nil)
        #expect(BroadcastRequestBuilder.check(Array(#"{"aps":{"timestamp":5}}"#.utf8))?.reason == "BadRequestPayload")
    }

    @Test func theLiveActivityRulesApplyWithTheBroadcastSizeLimit() throws {
        // An update without its content state breaks the Live Activity rules.
        let bare = try self.builder(template: #"{"aps":{"event":"update","timestamp":"{{$now}}"}}"#)
        let refused = bare.request(fields: ["x", "YQ=="], channelID: "YQ==", policy: nil, now: 1_790_000_000)
        #expect(refused.error?.reason == "BadRequestPayload")
        #expect(refused.error?.detail.contains("content-state") == true, "\(String(describing: refused.error))")
        // 4,500 bytes: over a device push's 4 KB, within a broadcast's 5 KB.
        let clock = String(repeating: "x", count: 4400)
        let fields = ["final", "YQ==", "none", "2", "1", clock]
        let request = try self.builder().request(fields: fields, channelID: "YQ==", policy: nil, now: 1_790_000_000)
            .get()
        #expect(request.body.count > 4096 && request.body.count <= 5120)
    }

    @Test func partitionsSplitChannelsStably() throws {
        let ids = (0..<1000).map { "Y2hhbm5lbC0\($0)=" }
        let parts = (0..<4).map { Partition(index: $0, count: 4)! }
        var seen = 0
        for id in ids {
            let owners = parts.filter { $0.contains(channel: id) }
            #expect(owners.count == 1)
            seen += owners.count
        }
        #expect(seen == 1000)
        // Each share is near a quarter.
        for part in parts {
            let share = ids.filter { part.contains(channel: $0) }.count
            #expect(share > 180 && share < 320, "\(share)")
        }
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
