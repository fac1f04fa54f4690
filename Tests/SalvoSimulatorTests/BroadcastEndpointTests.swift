import APNSWire
import Foundation
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The broadcast endpoint on the simulator's HTTP/2 push port over real TLS: the required headers, every documented
/// error, the per-channel publishing budget, and the ledger: each channel's updates exactly once (duplicates counted),
/// its fan-out under the channel's policy, and what its subscribers show (the latest `aps.timestamp` wins).
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2))) struct BroadcastEndpointTests {
    typealias H = BroadcastHarness

    @Test func aBroadcastIsAcceptedWithARequestIdAndAUniqueIdAndRecorded() async throws {
        try await H.run { harness in
            let management = try await harness.management()
            let channel = try await harness.createChannel(on: management)
            let push = try await harness.push()
            let requestID = "0b7e8f5a-3c2d-4e1f-9a8b-7c6d5e4f3a2b"
            let response = try await push.request(
                "POST",
                H.broadcastPath,
                headers: H.broadcastHeaders(channel, extra: [("apns-request-id", requestID)]),
                body: H.update(1_700_000_000, score: "1-0")
            )
            #expect(response.status == 200 && response.body.isEmpty)
            #expect(response.header("apns-request-id") == requestID)
            let unique = try #require(response.header("apns-unique-id"))
            #expect(APNSRequestHeaders.isCanonicalUUID(unique))
            let records = harness.registry.records(channel: channel)
            #expect(records.count == 1)
            #expect(records.first?.timestamp == 1_700_000_000 && records.first?.deliveredNow == 10)
            // The device API on the same port is untouched by broadcasts.
            #expect(harness.simulator.ledger.snapshot().accepted == 0)
        }
    }

    @Test func everyDocumentedBroadcastErrorComesWithItsStatus() async throws {
        try await H.run { harness in
            let management = try await harness.management()
            let channel = try await harness.createChannel(on: management, policy: 0)
            let push = try await harness.push()
            let update = H.update(1_700_000_000, score: "1-0")
            func expect(
                _ headers: [(String, String)],
                path: String = H.broadcastPath,
                method: String = "POST",
                body: [UInt8]? = nil,
                status: Int,
                reason: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) async throws {
                let response = try await push.request(method, path, headers: headers, body: body ?? update)
                #expect(response.status == status, "\(reason)", sourceLocation: sourceLocation)
                #expect(response.reason == reason, sourceLocation: sourceLocation)
                #expect(response.header("apns-request-id") != nil, sourceLocation: sourceLocation)
            }
            let headers = H.broadcastHeaders(channel)
            func without(_ name: String) -> [(String, String)] { headers.filter { $0.0 != name } }
            try await expect(headers, path: "/4/broadcasts/apps/\(H.app)/more", status: 404, reason: "BadPath")
            try await expect(headers, method: "PUT", status: 405, reason: "MethodNotAllowed")
            try await expect(
                headers,
                path: "/4/broadcasts/apps/\(H.app).push-type.liveactivity",
                status: 400,
                reason: "TopicDisallowed"
            )
            try await expect(
                headers,
                path: "/4/broadcasts/apps/com.example.other",
                status: 403,
                reason: "TopicMismatch"
            )
            try await expect(without("apns-channel-id"), status: 400, reason: "MissingChannelId")
            try await expect(H.broadcastHeaders("!!"), status: 400, reason: "BadChannelId")
            try await expect(H.broadcastHeaders("QUJDREVGR0g="), status: 400, reason: "ChannelNotRegistered")
            try await expect(without("apns-push-type"), status: 400, reason: "MissingPushType")
            try await expect(
                H.broadcastHeaders(channel, extra: [("apns-push-type", "alert")]),
                status: 400,
                reason: "InvalidPushType"
            )
            try await expect(without("apns-priority"), status: 400, reason: "BadPriority")
            try await expect(H.broadcastHeaders(channel, priority: "7"), status: 400, reason: "BadPriority")
            try await expect(without("apns-expiration"), status: 400, reason: "BadExpirationDate")
            try await expect(
                H.broadcastHeaders(channel, expiration: "1900000000"),
                status: 400,
                reason: "BadExpirationDate"
            )
            try await expect(headers, body: [], status: 400, reason: "PayloadEmpty")
            try await expect(headers, body: Array(repeating: 0x20, count: 5121), status: 413, reason: "PayloadTooLarge")
            try await expect(headers, body: Array("{not json".utf8), status: 400, reason: "BadRequestPayload")
            try await expect(
                headers,
                body: H.update(1_700_000_000, score: "0-0", event: "start"),
                status: 400,
                reason: "BadRequestPayload"
            )
            try await expect(
                H.broadcastHeaders(channel, extra: [("apns-request-id", "1234")]),
                status: 400,
                reason: "BadMessageId"
            )
            try await expect(
                H.broadcastHeaders(channel, extra: [("apns-id", "NOT-LOWER-CASE")]),
                status: 400,
                reason: "BadMessageId"
            )
            #expect(harness.registry.records().isEmpty, "nothing refused is recorded")
            // Exactly 5,120 bytes is allowed.
            var padded = Array(#"{"aps":{"timestamp":1,"event":"update"},"pad":""#.utf8)
            padded += Array(repeating: UInt8(ascii: "x"), count: 5120 - padded.count - 2) + Array(#""}"#.utf8)
            #expect(padded.count == 5120)
            let fits = try await push.request("POST", H.broadcastPath, headers: headers, body: padded)
            #expect(fits.status == 200)
        }
    }

    @Test func aBroadcastNeedsBroadcastOnForTheAppAndCredentials() async throws {
        try await H.run(broadcast: H.configuration { $0.enabledApps = [] }) { harness in
            let push = try await harness.push()
            let refused = try await push.request(
                "POST",
                H.broadcastPath,
                headers: H.broadcastHeaders("QUJDREVGR0g="),
                body: H.update(1, score: "a")
            )
            #expect(refused.status == 400 && refused.reason == "FeatureNotEnabled")
            let anonymous = try await harness.push(identity: .some(nil))
            let missing = try await anonymous.request(
                "POST",
                H.broadcastPath,
                headers: H.broadcastHeaders("QUJDREVGR0g="),
                body: H.update(1, score: "a")
            )
            #expect(missing.status == 403 && missing.reason == "MissingProviderToken")
        }
    }

    @Test func expirationIsForStoringChannelsAndTokensWorkForBroadcasts() async throws {
        try await H.run { harness in
            let management = try await harness.management()
            let stored = try await harness.createChannel(on: management, policy: 1)
            let push = try await harness.push(identity: .some(nil))
            let response = try await push.request(
                "POST",
                H.broadcastPath,
                headers: H.broadcastHeaders(stored, expiration: "1900000000", priority: "5")
                    + [("authorization", try HTTP2EndpointTests.bearer())],
                body: H.update(1_700_000_000, score: "2-1", event: "end")
            )
            #expect(response.status == 200)
            let record = try #require(harness.registry.records(channel: stored).first)
            #expect(record.expiration == 1_900_000_000 && record.priority == 5 && record.event == "end")
            #expect(record.policy == .mostRecentMessageStored)
        }
    }

    @Test func thePublishingBudgetAnswers429AndIsHigherWithoutStorage() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        let broadcast = H.configuration {
            $0.budget = .init(noMessageStored: 4, mostRecentMessageStored: 2, windowSeconds: 60)
        }
        try await H.run(broadcast: broadcast, clock: clock) { harness in
            let management = try await harness.management()
            let fast = try await harness.createChannel(on: management, policy: 0)
            let slow = try await harness.createChannel(on: management, policy: 1)
            let push = try await harness.push()
            func send(_ channel: String, _ n: Int) async throws -> Int {
                try await push.request(
                    "POST",
                    H.broadcastPath,
                    headers: H.broadcastHeaders(channel),
                    body: H.update(Int64(n), score: "\(n)")
                ).status
            }
            var statuses: [Int] = []
            for n in 1...5 { statuses.append(try await send(fast, n)) }
            #expect(statuses == [200, 200, 200, 200, 429])
            statuses = []
            for n in 1...3 { statuses.append(try await send(slow, n)) }
            #expect(statuses == [200, 200, 429])
            let refused = try await push.request(
                "POST",
                H.broadcastPath,
                headers: H.broadcastHeaders(fast),
                body: H.update(9, score: "9")
            )
            #expect(refused.reason == "TooManyRequests")
            clock.advance(by: 60)
            #expect(try await send(fast, 10) == 200, "the next window")
            #expect(harness.registry.snapshot().broadcastRefusals["TooManyRequests"] == 3)
            #expect(harness.registry.records().count == 7)
        }
    }

    @Test func theVerdictProvesEachUpdateOnceAndTheLatestTimestampWins() async throws {
        try await H.run { harness in
            let management = try await harness.management()
            var channels: [String] = []
            for _ in 0..<4 { channels.append(try await harness.createChannel(on: management)) }
            harness.registry.setSubscribers(250, channel: channels[0])
            let push = try await harness.push()
            func send(_ channel: String, _ timestamp: Int64, _ score: String) async throws {
                let response = try await push.request(
                    "POST",
                    H.broadcastPath,
                    headers: H.broadcastHeaders(channel),
                    body: H.update(timestamp, score: score)
                )
                #expect(response.status == 200)
            }
            // One update per channel for the first three: exactly once.
            for (index, channel) in channels.prefix(3).enumerated() { try await send(channel, 100, "\(index)-0") }
            let expected = Dictionary(uniqueKeysWithValues: channels.prefix(3).map { ($0, 1) })
            let clean = harness.registry.verdict(expected: expected)
            #expect(clean.passed, "\(clean.summary)")
            #expect(clean.channels == 3 && clean.distinctUpdates == 3 && clean.duplicates == 0)
            #expect(clean.ledger.deliveredNow == 250 + 10 + 10)

            // The same update again (stamped anew) is a duplicate; an older one after a newer one is stale.
            try await send(channels[1], 160, "1-0")
            try await send(channels[2], 300, "2-1")
            try await send(channels[2], 200, "2-0 earlier")
            try await send(channels[3], 100, "3-0")
            let verdict = harness.registry.verdict(expected: expected)
            #expect(!verdict.passed)
            #expect(verdict.duplicates == 1 && verdict.duplicateChannelIDs == [channels[1]])
            #expect(verdict.unexpectedChannels == 1 && verdict.unexpectedChannelIDs == [channels[3]])
            #expect(verdict.staleArrivals == 1)
            let line = try #require(verdict.lines.first { $0.channelID == channels[2] })
            #expect(line.shownTimestamp == 300 && line.staleArrivals == 1 && line.distinctUpdates == 3)
            let missing = harness.registry.verdict(expected: [channels[0]: 2])
            #expect(missing.channelsMissingUpdates == 1 && missing.missingChannelIDs == [channels[0]])
            let encoded = try JSONEncoder().encode(verdict)
            #expect(try JSONDecoder().decode(BroadcastVerdict.self, from: encoded) == verdict)
        }
    }

    @Test func storedBroadcastsReachOfflineSubscribersWhenTheyComeOnline() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        var plan = FaultPlan()
        plan.devices.offlineFraction = 0.5
        plan.devices.onlineAfterSeconds = 600
        try await H.run(plan: plan, clock: clock) { harness in
            let management = try await harness.management()
            let stored = try await harness.createChannel(on: management, policy: 1)
            let live = try await harness.createChannel(on: management, policy: 0)
            let push = try await harness.push()
            for (channel, expiration) in [(stored, "1800003600"), (live, "0")] {
                let response = try await push.request(
                    "POST",
                    H.broadcastPath,
                    headers: H.broadcastHeaders(channel, expiration: expiration),
                    body: H.update(1_800_000_000, score: "1-0")
                )
                #expect(response.status == 200)
            }
            var snapshot = harness.registry.snapshot()
            #expect(snapshot.deliveredNow == 10 && snapshot.stored == 5 && snapshot.dropped == 5)
            #expect(snapshot.deliveredLater == 0)
            clock.advance(by: 600)
            snapshot = harness.registry.snapshot()
            #expect(snapshot.deliveredLater == 5 && snapshot.expired == 0)
        }
    }
}
