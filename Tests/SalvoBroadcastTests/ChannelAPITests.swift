import APNSWire
import Foundation
import SalvoBroadcast
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A fresh folder under the test scratch root.
func scratchFolder(_ prefix: String) throws -> String {
    try TestScratch.newFolder(prefix)
}

/// The channel management API as requests and answers, without sockets.
@Suite(.tags(.pure), .runs(.pure)) struct ChannelAPITests {
    let api = ChannelManagement(bundleID: "com.example.scores")

    @Test func requestsFollowApplesPathsAndHeaders() {
        let create = self.api.create(policy: .none)
        #expect(create.method == "POST")
        #expect(create.path == "/1/apps/com.example.scores/channels")
        #expect(
            String(decoding: create.body, as: UTF8.self) == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#
        )
        #expect(create.header("apns-channel-id") == nil)
        let stored = self.api.create(policy: .mostRecent, requestID: "0a9e5f3c-1b2d-4c3e-9f80-123456789abc")
        #expect(String(decoding: stored.body, as: UTF8.self).contains(#""message-storage-policy":1"#))
        #expect(stored.header("apns-request-id") == "0a9e5f3c-1b2d-4c3e-9f80-123456789abc")

        // Read and delete name the channel in a header, not in the path.
        let read = self.api.read(channelID: "dHN0LTE=")
        #expect(read.method == "GET" && read.path == "/1/apps/com.example.scores/channels")
        #expect(read.header("apns-channel-id") == "dHN0LTE=")
        let delete = self.api.delete(channelID: "dHN0LTE=")
        #expect(delete.method == "DELETE" && delete.path == "/1/apps/com.example.scores/channels")
        #expect(delete.header("apns-channel-id") == "dHN0LTE=")
        let list = self.api.list()
        #expect(list.method == "GET" && list.path == "/1/apps/com.example.scores/all-channels")
        #expect(list.headers.isEmpty && list.body.isEmpty)
    }

    @Test func answersAreReadAndFailuresKeepApplesReason() throws {
        let created = HTTP2Response(status: 201, headers: [.init("apns-channel-id", "Y2hhbm5lbA==")])
        #expect(try ChannelManagement.createdChannel(created).get() == "Y2hhbm5lbA==")
        let noHeader = HTTP2Response(status: 201)
        guard case .failure(let missing) = ChannelManagement.createdChannel(noHeader) else {
            Issue.record("a 201 without an id was taken")
            return
        }
        #expect(missing.reason.contains("apns-channel-id"))

        let limit = HTTP2Response(
            status: 400,
            headers: [.init("apns-request-id", "req-1")],
            body: Array(#"{"reason":"CannotCreateChannelConfig"}"#.utf8)
        )
        guard case .failure(let refused) = ChannelManagement.createdChannel(limit) else {
            Issue.record("a 400 was taken")
            return
        }
        #expect(refused == ChannelFailure(status: 400, reason: "CannotCreateChannelConfig", requestID: "req-1"))
        #expect(refused.description == "400 CannotCreateChannelConfig (apns-request-id req-1)")
        #expect(!refused.isRetryable)
        #expect(ChannelFailure(status: 429, reason: "TooManyRequests").isRetryable)

        let read = HTTP2Response(
            status: 200,
            body: Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8)
        )
        #expect(try ChannelManagement.readPolicy(read).get() == .mostRecent)
        let notRegistered = HTTP2Response(status: 400, body: Array(#"{"reason":"ChannelNotRegistered"}"#.utf8))
        #expect(throws: ChannelFailure.self) { try ChannelManagement.readPolicy(notRegistered).get() }

        let all = HTTP2Response(status: 200, body: Array(#"{"channels":["YQ==","Yg=="]}"#.utf8))
        #expect(try ChannelManagement.channels(all).get() == ["YQ==", "Yg=="])
        let mismatch = HTTP2Response(status: 403, body: Array(#"{"reason":"TopicMismatch"}"#.utf8))
        guard case .failure(let topic) = ChannelManagement.channels(mismatch) else {
            Issue.record("a 403 was taken")
            return
        }
        #expect(topic.reason == "TopicMismatch" && topic.status == 403)
        #expect(throws: Never.self) { try ChannelManagement.deleted(HTTP2Response(status: 204)).get() }
        let bare = HTTP2Response(status: 500)
        #expect(ChannelManagement.deleted(bare).failureReason == "HTTP 500")
    }

    @Test func channelIDsMustBeBase64() {
        #expect(ChannelID.isWellFormed("dHN0LTE="))
        #expect(ChannelID.isWellFormed("dHN0LTE"))
        #expect(ChannelID.isWellFormed("ab+/cd=="))
        #expect(!ChannelID.isWellFormed(""))
        #expect(!ChannelID.isWellFormed("not base64!"))
        #expect(!ChannelID.isWellFormed("abc\ndef"))
        #expect(!ChannelID.isWellFormed(String(repeating: "A", count: 400)))
    }

    @Test func policiesAndEnvironmentsHaveTheirNamesAndHosts() {
        #expect(MessageStoragePolicy(name: "none") == MessageStoragePolicy.none)
        #expect(MessageStoragePolicy(name: "most-recent") == .mostRecent)
        #expect(MessageStoragePolicy(name: "1") == .mostRecent)
        #expect(MessageStoragePolicy(name: "sometimes") == nil)
        #expect(BroadcastEnvironment.development.managementHost == "api-manage-broadcast.sandbox.push.apple.com")
        #expect(BroadcastEnvironment.development.managementPort == 2195)
        #expect(BroadcastEnvironment.production.managementHost == "api-manage-broadcast.push.apple.com")
        #expect(BroadcastEnvironment.production.managementPort == 2196)
        #expect(BroadcastEnvironment.production.pushHost == "api.push.apple.com")
        #expect(BroadcastEnvironment.development.pushPort == 443)
    }
}

extension Result {
    var failureReason: String? {
        if case .failure(let error) = self { return (error as? ChannelFailure)?.reason }
        return nil
    }
}
