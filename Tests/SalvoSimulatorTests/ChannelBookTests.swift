import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The channel and broadcast decisions as values, without sockets: the book of channels (limit, ids never issued
/// twice, budget windows on a given time), the request checks' order, and the broadcast ledger's fan-out and device
/// view.
@Suite(.tags(.pure), .runs(.pure)) struct ChannelBookTests {
    static let app = "com.example.app"
    static let certificate = HTTP2RequestCheck.Credentials.certificate(.valid(app))

    @Test func theLimitCountsLiveChannelsAndADeletedIdIsNeverIssuedAgain() throws {
        var book = ChannelBook(seed: 7)
        var ids: [String] = []
        for _ in 0..<3 {
            let channel = try book.create(app: Self.app, policy: .noMessageStored, subscribers: 5, limit: 3, now: 100)
                .get()
            ids.append(channel.id)
        }
        #expect(Set(ids).count == 3)
        #expect(ids.allSatisfy(ChannelBook.isWellFormed))
        let refused = book.create(app: Self.app, policy: .noMessageStored, subscribers: 5, limit: 3, now: 100)
        #expect(refused == .failure(BroadcastRules.cannotCreateChannelConfig))
        // Another app has its own limit.
        #expect(
            (try? book.create(app: "com.example.other", policy: .noMessageStored, subscribers: 1, limit: 3, now: 1)
                .get()) != nil
        )
        let deleted = book.delete(ids[1], app: Self.app)
        let deletedAgain = book.delete(ids[1], app: Self.app)
        #expect(deleted)
        #expect(!deletedAgain, "deleted once")
        #expect(book.channel(ids[1], app: Self.app) == nil)
        #expect(book.list(app: Self.app) == [ids[0], ids[2]])
        let again = try book.create(app: Self.app, policy: .mostRecentMessageStored, subscribers: 5, limit: 3, now: 101)
            .get()
        #expect(!ids.contains(again.id))
        #expect(book.deleted[ids[1]] != nil)
        // A channel belongs to its app.
        #expect(book.channel(ids[0], app: "com.example.other") == nil)
    }

    @Test func channelIdsAreDistinctForEverySerialAndWellFormedIsBase64() {
        let ids = (1...2000).map { ChannelBook.channelID(serial: UInt64($0), seed: 3) }
        #expect(Set(ids).count == 2000)
        #expect(ChannelBook.isWellFormed(ids[0]))
        #expect(!ChannelBook.isWellFormed("not base64!"))
        #expect(!ChannelBook.isWellFormed(""))
        #expect(!ChannelBook.isWellFormed(String(repeating: "QUFB", count: 20)), "too long")
    }

    @Test func theBudgetRefreshesEachWindowAndIsHigherForNoStorage() throws {
        var book = ChannelBook(seed: 1)
        let budget = BroadcastConfiguration.Budget(noMessageStored: 3, mostRecentMessageStored: 1, windowSeconds: 60)
        let fast = try book.create(app: Self.app, policy: .noMessageStored, subscribers: 1, limit: 10, now: 0).get()
        let slow = try book.create(app: Self.app, policy: .mostRecentMessageStored, subscribers: 1, limit: 10, now: 0)
            .get()
        var charges: [Bool] = []
        for _ in 0..<4 { charges.append(book.charge(fast.id, budget: budget, now: 120)) }
        for _ in 0..<2 { charges.append(book.charge(slow.id, budget: budget, now: 120)) }
        charges.append(book.charge(fast.id, budget: budget, now: 179))
        #expect(charges == [true, true, true, false, true, false, false])
        let nextWindow = (
            book.charge(fast.id, budget: budget, now: 180), book.charge(slow.id, budget: budget, now: 180)
        )
        #expect(nextWindow == (true, true), "a new window")
    }

    @Test func channelRequestsAreCheckedInOrder() {
        func check(
            _ method: String?,
            _ path: String?,
            fields: [(name: String, value: String)] = [],
            credentials: HTTP2RequestCheck.Credentials = Self.certificate,
            body: String = ""
        ) -> Result<ChannelRequestCheck.Operation, APNSReason> {
            ChannelRequestCheck.check(
                method: method,
                path: path,
                fields: fields,
                credentials: credentials,
                enabledApps: [Self.app],
                body: Array(body.utf8),
                bodyBytes: body.utf8.count
            )
        }
        let create = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#
        #expect(
            check("POST", "/1/apps/\(Self.app)/channels", body: create)
                == .success(.create(app: Self.app, policy: .mostRecentMessageStored))
        )
        #expect(check("POST", "/1/apps/\(Self.app)/channel", body: create) == .failure(.badPath))
        #expect(check("POST", "/1/apps/\(Self.app)/channels/abc", body: create) == .failure(.badPath))
        #expect(check("PUT", "/1/apps/\(Self.app)/channels", body: create) == .failure(.methodNotAllowed))
        #expect(check("POST", "/1/apps/\(Self.app)/all-channels") == .failure(.methodNotAllowed))
        #expect(
            check("POST", "/1/apps/\(Self.app).push-type.liveactivity/channels", body: create)
                == .failure(.topicDisallowed)
        )
        #expect(check("GET", "/1/apps/com.example.other/all-channels") == .failure(BroadcastRules.topicMismatch))
        #expect(check("GET", "/1/apps/\(Self.app)/all-channels", credentials: .none) == .failure(.missingProviderToken))
        let anyApp = HTTP2RequestCheck.Credentials.token(.success(.init(keyID: "K", issuedAt: 0, topics: [])))
        #expect(
            check("GET", "/1/apps/com.example.other/all-channels", credentials: anyApp)
                == .failure(BroadcastRules.featureNotEnabled)
        )
        #expect(check("GET", "/1/apps/\(Self.app)/channels") == .failure(BroadcastRules.missingChannelId))
        #expect(
            check("GET", "/1/apps/\(Self.app)/channels", fields: [("apns-channel-id", "%%%")])
                == .failure(BroadcastRules.badChannelId)
        )
        #expect(
            check("DELETE", "/1/apps/\(Self.app)/channels", fields: [("apns-channel-id", "QUJD")])
                == .success(.delete(app: Self.app, channelID: "QUJD"))
        )
        // Bodies.
        let path = "/1/apps/\(Self.app)/channels"
        #expect(check("POST", path) == .failure(.payloadEmpty))
        #expect(check("POST", path, body: "{nope") == .failure(BroadcastRules.badRequestPayload))
        #expect(
            check("POST", path, body: #"{"message-storage-policy":0,"push-type":"LiveActivity","x":1}"#)
                == .failure(BroadcastRules.badRequestParams)
        )
        #expect(
            check("POST", path, body: #"{"push-type":"LiveActivity"}"#)
                == .failure(BroadcastRules.badStoragePolicyReason)
        )
        #expect(
            check("POST", path, body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#)
                == .failure(BroadcastRules.badStoragePolicyReason)
        )
        #expect(check("POST", path, body: #"{"message-storage-policy":0}"#) == .failure(BroadcastRules.missingPushType))
        #expect(
            check("POST", path, body: #"{"message-storage-policy":0,"push-type":"alert"}"#)
                == .failure(.invalidPushType)
        )
        #expect(
            check("POST", path, body: #"{"message-storage-policy":true,"push-type":"liveactivity"}"#)
                == .failure(BroadcastRules.badStoragePolicyReason)
        )
        #expect(
            check("POST", path, body: #"{"message-storage-policy":0,"push-type":"liveactivity"}"#)
                == .success(.create(app: Self.app, policy: .noMessageStored)),
            "either case of the push type"
        )
    }

    static func update(_ timestamp: Int64, score: String, event: String = "update") -> [UInt8] {
        Array(#"{"aps":{"timestamp":\#(timestamp),"event":"\#(event)","content-state":{"score":"\#(score)"}}}"#.utf8)
    }

    @Test func broadcastsAreCheckedInOrder() {
        let id = ChannelBook.channelID(serial: 1, seed: 0)
        func check(
            _ headers: [(name: String, value: String)],
            payload: [UInt8] = Self.update(1, score: "1-0"),
            path: String = "/4/broadcasts/apps/\(Self.app)",
            policy: ChannelStoragePolicy = .noMessageStored
        ) -> APNSReason? {
            let result = BroadcastRequestCheck.check(
                method: "POST",
                path: path,
                fields: headers,
                credentials: Self.certificate,
                enabledApps: [Self.app],
                policyOf: { channel, _ in channel == id ? policy : nil },
                payload: payload,
                payloadBytes: payload.count
            )
            if case .failure(let reason) = result { return reason }
            return nil
        }
        let good: [(name: String, value: String)] = [
            ("apns-channel-id", id), ("apns-push-type", "LiveActivity"), ("apns-expiration", "0"),
            ("apns-priority", "10"),
        ]
        func without(_ name: String) -> [(name: String, value: String)] { good.filter { $0.name != name } }
        func with(_ name: String, _ value: String) -> [(name: String, value: String)] {
            without(name) + [(name, value)]
        }
        #expect(check(good) == nil)
        #expect(check(good, path: "/4/broadcasts/apps/\(Self.app)/x") == .badPath)
        #expect(check(good, path: "/4/broadcasts/apps/\(Self.app).push-type.liveactivity") == .topicDisallowed)
        #expect(check(without("apns-channel-id")) == BroadcastRules.missingChannelId)
        #expect(check(with("apns-channel-id", "a b")) == BroadcastRules.badChannelId)
        #expect(check(with("apns-channel-id", "QUJD")) == BroadcastRules.channelNotRegistered)
        #expect(check(without("apns-push-type")) == BroadcastRules.missingPushType)
        #expect(check(with("apns-push-type", "alert")) == .invalidPushType)
        #expect(check(without("apns-priority")) == .badPriority)
        #expect(check(with("apns-priority", "7")) == .badPriority)
        #expect(check(with("apns-priority", "1")) == nil)
        #expect(check(without("apns-expiration")) == .badExpirationDate)
        #expect(check(with("apns-expiration", "1900000000")) == .badExpirationDate, "policy 0 stores nothing")
        #expect(check(with("apns-expiration", "1900000000"), policy: .mostRecentMessageStored) == nil)
        #expect(check(good, payload: []) == .payloadEmpty)
        #expect(check(good, payload: Array(repeating: 0x20, count: 5121)) == .payloadTooLarge)
        #expect(check(good, payload: Array("{".utf8)) == BroadcastRules.badRequestPayload)
        #expect(check(good, payload: Self.update(1, score: "0-0", event: "start")) == BroadcastRules.notAnUpdateReason)
        #expect(check(good, payload: Self.update(1, score: "0-0", event: "end")) == nil)
        #expect(check(good, payload: Array(#"{"aps":{"event":"update"}}"#.utf8)) == BroadcastRules.notAnUpdateReason)
    }

    @Test func theUpdateIsThePayloadWithoutItsTimestamp() throws {
        let first = try BroadcastRequestCheck.update(Self.update(100, score: "1-0")).get()
        let restamped = try BroadcastRequestCheck.update(Self.update(160, score: "1-0")).get()
        let next = try BroadcastRequestCheck.update(Self.update(160, score: "2-0")).get()
        #expect(first.updateDigest == restamped.updateDigest)
        #expect(first.payloadDigest != restamped.payloadDigest)
        #expect(next.updateDigest != restamped.updateDigest)
        #expect(first.timestamp == 100 && first.event == "update")
    }

    static func passed(
        _ channel: String,
        _ timestamp: Int64,
        score: String,
        policy: ChannelStoragePolicy = .noMessageStored,
        expiration: UInt32 = 0
    ) throws -> BroadcastRequestCheck.Passed {
        BroadcastRequestCheck.Passed(
            app: Self.app,
            channelID: channel,
            policy: policy,
            priority: 10,
            expiration: expiration,
            update: try BroadcastRequestCheck.update(Self.update(timestamp, score: score)).get()
        )
    }

    @Test func theLatestTimestampWinsAndDuplicatesAndStaleArrivalsAreCounted() throws {
        var book = BroadcastBook(offlineFraction: 0, onlineAt: nil)
        _ = book.accept(try Self.passed("A", 200, score: "2-0"), subscribers: 10, now: 1)
        let stale = book.accept(try Self.passed("A", 100, score: "1-0"), subscribers: 10, now: 2)
        let duplicate = book.accept(try Self.passed("A", 300, score: "2-0"), subscribers: 10, now: 3)
        #expect(stale.stale && !stale.duplicate)
        #expect(duplicate.duplicate && !duplicate.stale)
        let line = try #require(book.lines["A"])
        #expect(line.shownTimestamp == 300)
        #expect(line.staleArrivals == 1 && line.duplicates == 1 && line.updates.count == 2)
        #expect(line.deliveredNow == 30)
    }

    @Test func offlineSubscribersGetTheNewestStoredMessageOnlyOnAStoringChannel() throws {
        var book = BroadcastBook(offlineFraction: 0.25, onlineAt: 1000)
        let noStorage = book.accept(try Self.passed("N", 10, score: "a"), subscribers: 8, now: 100)
        #expect(noStorage.deliveredNow == 6 && noStorage.dropped == 2 && noStorage.stored == 0)
        let kept = try Self.passed("S", 10, score: "a", policy: .mostRecentMessageStored, expiration: 5000)
        let keptRecord = book.accept(kept, subscribers: 8, now: 100)
        #expect(keptRecord.stored == 2)
        let newer = try Self.passed("S", 20, score: "b", policy: .mostRecentMessageStored, expiration: 5000)
        _ = book.accept(newer, subscribers: 8, now: 200)
        let once = try Self.passed("S", 30, score: "c", policy: .mostRecentMessageStored, expiration: 0)
        let onceRecord = book.accept(once, subscribers: 8, now: 300)
        #expect(onceRecord.dropped == 2, "expiration 0 stores nothing")
        let expiring = try Self.passed("E", 10, score: "a", policy: .mostRecentMessageStored, expiration: 900)
        _ = book.accept(expiring, subscribers: 8, now: 100)
        book.advance(to: 999)
        #expect(book.lines["S"]?.deliveredLater == 0)
        book.advance(to: 1000)
        #expect(book.lines["S"]?.deliveredLater == 2 && book.lines["S"]?.superseded == 2)
        #expect(book.lines["E"]?.expired == 2 && book.lines["E"]?.deliveredLater == 0)
        let late = book.accept(try Self.passed("N", 40, score: "z"), subscribers: 8, now: 1001)
        #expect(late.deliveredNow == 8 && late.dropped == 0, "everyone online")
    }
}
