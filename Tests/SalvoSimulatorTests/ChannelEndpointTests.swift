import APNSWire
import Foundation
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The channel management endpoint over real TLS on its own port: create, read, delete and list, both kinds of
/// credentials, `apns-request-id` echoed or made, the per-app limit, and every documented error with its status.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2))) struct ChannelEndpointTests {
    typealias H = BroadcastHarness

    @Test func createReadListAndDeleteWithACertificate() async throws {
        try await H.run { harness in
            let connection = try await harness.management()
            let requestID = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
            let created = try await connection.request(
                "POST",
                H.channelsPath,
                headers: [("apns-request-id", requestID)],
                body: Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8)
            )
            #expect(created.status == 201)
            #expect(created.body.isEmpty)
            #expect(created.header("apns-request-id") == requestID)
            let id = try #require(created.header("apns-channel-id"))
            #expect(Data(base64Encoded: id) != nil)
            let other = try await harness.createChannel(on: connection, policy: 0)

            let read = try await connection.request("GET", H.channelsPath, headers: [("apns-channel-id", id)])
            #expect(read.status == 200)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(read.body)) as? [String: Any])
            #expect(json["message-storage-policy"] as? Int == 1)
            #expect(json["push-type"] as? String == "LiveActivity")
            let made = try #require(read.header("apns-request-id"))
            #expect(APNSRequestHeaders.isCanonicalUUID(made))

            let list = try await connection.request("GET", "/1/apps/\(H.app)/all-channels")
            #expect(list.status == 200)
            let channels = try #require(try JSONSerialization.jsonObject(with: Data(list.body)) as? [String: Any])
            #expect(channels["channels"] as? [String] == [id, other])

            let deleted = try await connection.request("DELETE", H.channelsPath, headers: [("apns-channel-id", id)])
            #expect(deleted.status == 204 && deleted.body.isEmpty)
            let gone = try await connection.request("GET", H.channelsPath, headers: [("apns-channel-id", id)])
            #expect(gone.status == 400 && gone.reason == "ChannelNotRegistered")
            let twice = try await connection.request("DELETE", H.channelsPath, headers: [("apns-channel-id", id)])
            #expect(twice.status == 400 && twice.reason == "ChannelNotRegistered")
            let after = try await connection.request("GET", "/1/apps/\(H.app)/all-channels")
            #expect(String(decoding: after.body, as: UTF8.self) == #"{"channels":["\#(other)"]}"#)
            #expect(harness.registry.channel(id)?.deleted == true)
            #expect(harness.registry.snapshot().channelsDeleted == 1)
        }
    }

    @Test func providerTokensWorkWithoutACertificateAndBadOnesAreRefused() async throws {
        try await H.run { harness in
            let connection = try await harness.management(identity: .some(nil))
            let none = try await connection.request("GET", "/1/apps/\(H.app)/all-channels")
            #expect(none.status == 403 && none.reason == "MissingProviderToken")
            #expect(none.header("apns-request-id") != nil, "errors carry the request id too")
            let bearer = try HTTP2EndpointTests.bearer()
            let id = try await harness.createChannel(on: connection, headers: [("authorization", bearer)])
            let read = try await connection.request(
                "GET",
                H.channelsPath,
                headers: [("authorization", bearer), ("apns-channel-id", id)]
            )
            #expect(read.status == 200)
            let forged = try await connection.request(
                "GET",
                "/1/apps/\(H.app)/all-channels",
                headers: [("authorization", "bearer e30.e30.c2ln")]
            )
            #expect(forged.status == 403 && forged.reason == "InvalidProviderToken")
        }
    }

    @Test func everyDocumentedChannelErrorComesWithItsStatus() async throws {
        try await H.run { harness in
            let connection = try await harness.management()
            let good = Array(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8)
            func expect(
                _ method: String,
                _ path: String,
                headers: [(String, String)] = [],
                body: [UInt8]? = nil,
                status: Int,
                reason: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) async throws {
                let response = try await connection.request(method, path, headers: headers, body: body)
                #expect(response.status == status, "\(method) \(path)", sourceLocation: sourceLocation)
                #expect(response.reason == reason, "\(method) \(path)", sourceLocation: sourceLocation)
                #expect(response.header("apns-request-id") != nil, sourceLocation: sourceLocation)
            }
            try await expect("POST", "/1/apps/\(H.app)/channel", body: good, status: 404, reason: "BadPath")
            try await expect("POST", "/1/apps/\(H.app)/channels/x", body: good, status: 404, reason: "BadPath")
            try await expect("PUT", H.channelsPath, body: good, status: 405, reason: "MethodNotAllowed")
            try await expect("DELETE", "/1/apps/\(H.app)/all-channels", status: 405, reason: "MethodNotAllowed")
            try await expect(
                "POST",
                "/1/apps/\(H.app).push-type.liveactivity/channels",
                body: good,
                status: 400,
                reason: "TopicDisallowed"
            )
            try await expect("GET", "/1/apps/com.example.other/all-channels", status: 403, reason: "TopicMismatch")
            try await expect("GET", H.channelsPath, status: 400, reason: "MissingChannelId")
            try await expect(
                "GET",
                H.channelsPath,
                headers: [("apns-channel-id", "a%b")],
                status: 400,
                reason: "BadChannelId"
            )
            try await expect(
                "DELETE",
                H.channelsPath,
                headers: [("apns-channel-id", "QUJDREVGR0g=")],
                status: 400,
                reason: "ChannelNotRegistered"
            )
            try await expect("POST", H.channelsPath, body: [], status: 400, reason: "PayloadEmpty")
            try await expect("POST", H.channelsPath, body: Array("{".utf8), status: 400, reason: "BadRequestPayload")
            try await expect(
                "POST",
                H.channelsPath,
                body: Array(#"{"message-storage-policy":0,"push-type":"LiveActivity","name":"x"}"#.utf8),
                status: 400,
                reason: "BadRequestParams"
            )
            try await expect(
                "POST",
                H.channelsPath,
                body: Array(#"{"message-storage-policy":0}"#.utf8),
                status: 400,
                reason: "MissingPushType"
            )
            try await expect(
                "POST",
                H.channelsPath,
                body: Array(#"{"message-storage-policy":0,"push-type":"alert"}"#.utf8),
                status: 400,
                reason: "InvalidPushType"
            )
            try await expect(
                "POST",
                H.channelsPath,
                body: Array(repeating: 0x20, count: 6000),
                status: 413,
                reason: "PayloadTooLarge"
            )
            try await expect(
                "GET",
                "/1/apps/\(H.app)/all-channels",
                headers: [("apns-request-id", "NOT-A-UUID")],
                status: 400,
                reason: "BadMessageId"
            )
            let refusals = harness.registry.snapshot().channelRefusals
            #expect(refusals["BadPath"] == 2 && refusals["ChannelNotRegistered"] == 1)
        }
    }

    @Test func anAppWithoutBroadcastIsFeatureNotEnabled() async throws {
        let broadcast = H.configuration { $0.enabledApps = ["com.example.elsewhere"] }
        try await H.run(broadcast: broadcast) { harness in
            let connection = try await harness.management()
            let response = try await connection.request(
                "POST",
                H.channelsPath,
                body: Array(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8)
            )
            #expect(response.status == 400 && response.reason == "FeatureNotEnabled")
        }
    }

    @Test func theChannelLimitRefusesOneMoreAndADeleteFreesAPlace() async throws {
        try await H.run(broadcast: H.configuration { $0.channelLimit = 5 }) { harness in
            let connection = try await harness.management()
            var ids: [String] = []
            for _ in 0..<5 { ids.append(try await harness.createChannel(on: connection)) }
            let refused = try await connection.request(
                "POST",
                H.channelsPath,
                body: Array(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8)
            )
            #expect(refused.status == 400 && refused.reason == "CannotCreateChannelConfig")
            let deleted = try await connection.request("DELETE", H.channelsPath, headers: [("apns-channel-id", ids[0])])
            #expect(deleted.status == 204)
            let again = try await harness.createChannel(on: connection)
            #expect(!ids.contains(again), "a deleted id is never issued again")
            #expect(harness.registry.channels(app: H.app) == Array(ids.dropFirst()) + [again])
        }
    }

    @Test func aLongChannelListCrossesFramesAndFlowControl() async throws {
        try await H.run(broadcast: H.configuration { $0.channelLimit = 10_000 }) { harness in
            let connection = try await harness.management()
            // 2,600 ids of 24 characters: ~70 KB, more than a frame and the default 64 KiB window.
            for _ in 0..<2600 { _ = try await harness.createChannel(on: connection) }
            let list = try await connection.request("GET", "/1/apps/\(H.app)/all-channels")
            #expect(list.status == 200)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(list.body)) as? [String: Any])
            let ids = try #require(json["channels"] as? [String])
            #expect(ids.count == 2600 && Set(ids).count == 2600)
            #expect(ids == harness.registry.channels(app: H.app))
        }
    }
}
