import APNSWire
import Foundation
import SalvoService
import SalvoTestTraits
import Testing

/// A request's notifications read and checked as values: each bad one refused with its field and reason, the rest
/// of its batch accepted; a body that is not a batch at all refused whole.
@Suite(.tags(.pure), .runs(.pure)) struct NotificationBatchTests {
    static let token = String(repeating: "ab", count: 32)

    static func read(
        _ json: String,
        templates: [String: ServiceTemplate] = [:]
    ) throws(ServiceProblem)
        -> NotificationBatch
    {
        var next = 0
        return try NotificationBatch.read(
            Array(json.utf8),
            defaults: .init(topic: "com.example.app"),
            templates: { templates[$0] },
            makeID: {
                next += 1
                return "00000000-0000-4000-8000-00000000000\(next)"
            }
        )
    }

    static func refusal(_ notification: String) throws -> FieldError? {
        let batch = try Self.read(#"{"notifications":[\#(notification)]}"#)
        guard case .refused(let error) = batch.items.first else { return nil }
        return error
    }

    @Test func aNotificationTakesTheDefaultsAndItsIDIsItsApnsID() throws {
        let batch = try Self.read(#"{"notifications":[{"token":"\#(Self.token)","payload":{"aps":{"alert":"hi"}}}]}"#)
        let notification = try #require(batch.accepted.first)
        #expect(notification.id == "00000000-0000-4000-8000-000000000001")
        #expect(notification.headers.id == notification.id)
        #expect(notification.headers.topic == "com.example.app")
        #expect(notification.headers.pushType == .alert)
        #expect(String(decoding: notification.payload, as: UTF8.self) == #"{"aps":{"alert":"hi"}}"#)
        #expect(notification.token.hexString == Self.token)
    }

    @Test func theCallersHeadersAreKept() throws {
        let batch = try Self.read(
            #"""
            {"notifications":[{"token":"\#(Self.token.uppercased())","payload":{"aps":{"content-available":1}},
            "push_type":"background","priority":5,"topic":"com.example.other","expiration":1767225600,
            "collapse_id":"score","apns_id":"123e4567-e89b-42d3-a456-426614174000"}]}
            """#
        )
        let headers = try #require(batch.accepted.first).headers
        #expect(headers.pushType == .background)
        #expect(headers.priority == .powerConsiderate)
        #expect(headers.topic == "com.example.other")
        #expect(headers.expiration == 1_767_225_600)
        #expect(headers.collapseID == "score")
        #expect(headers.id == "123e4567-e89b-42d3-a456-426614174000")
    }

    @Test(arguments: [
        (#"{"token":"zz","payload":{"aps":{}}}"#, "notifications[0].token"),
        (#"{"token":"abcd","payload":{"aps":{}}}"#, "notifications[0].token"),
        (#"{"token":7,"payload":{"aps":{}}}"#, "notifications[0].token"),
        (#"{"payload":{"aps":{}}}"#, "notifications[0].token"),
        (#"{"token":"TOKEN"}"#, "notifications[0].payload"),
        (#"{"token":"TOKEN","payload":[1]}"#, "notifications[0].payload"),
        (#"{"token":"TOKEN","payload":{"aps":3}}"#, "notifications[0].payload"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"push_type":"telegram"}"#, "notifications[0].push_type"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"priority":7}"#, "notifications[0].priority"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"expiration":-1}"#, "notifications[0].expiration"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"expiration":"soon"}"#, "notifications[0].expiration"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"apns_id":"nope"}"#, "notifications[0].apns_id"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"collapse_id":"COLLAPSE"}"#, "notifications[0].collapse_id"),
        (#"{"token":"TOKEN","payload":{"aps":{}},"template":"t"}"#, "notifications[0].template"),
        (#"{"token":"TOKEN","template":"missing"}"#, "notifications[0].template"),
        (
            #"{"token":"TOKEN","payload":{"aps":{}},"push_type":"background","priority":10}"#,
            "notifications[0].priority"
        ),
        (#""just text""#, "notifications[0]"),
    ])
    func eachBadFieldIsNamed(notification: String, field: String) throws {
        let text = notification.replacingOccurrences(of: "TOKEN", with: Self.token)
            .replacingOccurrences(of: "COLLAPSE", with: String(repeating: "c", count: 65))
        let error = try #require(try Self.refusal(text))
        #expect(error.field == field, "\(error.reason)")
        #expect(!error.reason.isEmpty)
    }

    @Test func aPayloadOverItsPushTypesLimitIsRefusedAndVoIPHasMore() throws {
        let body = String(repeating: "x", count: 4500)
        let alert = try #require(
            try Self.refusal(#"{"token":"\#(Self.token)","payload":{"aps":{"alert":"\#(body)"}}}"#)
        )
        #expect(alert.field == "notifications[0].payload")
        #expect(alert.reason.contains("4096"))
        let voip = try Self.read(
            #"{"notifications":[{"token":"\#(Self.token)","push_type":"voip","topic":"com.example.app.voip","payload":{"aps":{"alert":"\#(body)"}}}]}"#
        )
        #expect(voip.accepted.count == 1)
    }

    @Test func oneBadNotificationLeavesTheRestOfItsBatch() throws {
        let batch = try Self.read(
            #"""
            {"notifications":[{"token":"\#(Self.token)","payload":{"aps":{}}},{"token":"12","payload":{"aps":{}}},
            {"token":"\#(Self.token)","payload":{"aps":{}}}]}
            """#
        )
        #expect(batch.accepted.count == 2)
        #expect(batch.refusedCount == 1)
        guard case .refused(let error) = batch.items[1] else {
            Issue.record("the second notification was not refused")
            return
        }
        #expect(error.field == "notifications[1].token")
    }

    @Test(arguments: [
        ("{", "bad-json"),
        ("[]", "bad-request"),
        (#"{"other":1}"#, "bad-request"),
        (#"{"notifications":{}}"#, "bad-request"),
        (#"{"notifications":[]}"#, "bad-request"),
    ])
    func aBodyThatIsNotABatchIsRefusedWhole(body: String, kind: String) {
        #expect(throws: ServiceProblem.self) { try Self.read(body) }
        do {
            _ = try Self.read(body)
        } catch {
            #expect(error.kind.slug == kind)
            #expect(error.status == 400)
        }
    }

    @Test func sharedPayloadsAreReadOnceAndEachDistinctOneAsItWasWritten() throws {
        // The same payload three times (white space differing), then one of its own with escapes, then the first again.
        let first = #"{"aps":{"alert":"Same","badge":1}}"#
        let body = #"""
            {"notifications":[
              {"token":"\#(Self.token)","payload":\#(first)},
              {"token":"\#(Self.token)","payload":{ "aps" : { "alert" : "Same", "badge" : 1 } }},
              {"token":"\#(Self.token)","payload":\#(first)},
              {"token":"\#(Self.token)","payload":{"aps":{"alert":"caf\u00e9 \"x\""},"n":[1,2]}},
              {"token":"\#(Self.token)","payload":\#(first),"push_type":"background","priority":5}
            ]}
            """#
        let batch = try Self.read(body)
        #expect(batch.accepted.count == 5)
        #expect(
            batch.accepted.map { String(decoding: $0.payload, as: UTF8.self) } == [
                first, first, first, #"{"aps":{"alert":"caf\u00e9 \"x\""},"n":[1,2]}"#, first,
            ]
        )
        // A background push's payload checks still apply to a payload read before: its limit, its priority.
        #expect(batch.accepted[4].headers.pushType == .background)
    }

    @Test func aKeyRepeatedInAPayloadIsTheWholeBodysFaultAtItsPlace() throws {
        let body = #"{"notifications":[{"token":"\#(Self.token)","payload":{"aps":{},"x":1,"x":2}}]}"#
        do {
            _ = try Self.read(body)
            Issue.record("a payload with a repeated key was taken")
        } catch {
            #expect(error.kind.slug == "bad-json")
            #expect(error.detail.contains("the key \"x\" appears twice"), "\(error.detail)")
            #expect(error.detail.contains("line 1, column 121"), "\(error.detail)")
        }
        // A syntax fault after it: still the repeat, the first fault in the text, is named.
        do {
            _ = try Self.read(body.replacingOccurrences(of: "]}", with: "],}"))
            Issue.record("a broken body was taken")
        } catch {
            #expect(error.detail.contains("appears twice"), "\(error.detail)")
        }
    }

    @Test func aThousandAndOneNotificationsAreTooMany() throws {
        let one = #"{"token":"\#(Self.token)","payload":{"aps":{}}}"#
        let many = Array(repeating: one, count: 1001).joined(separator: ",")
        do {
            _ = try Self.read(#"{"notifications":[\#(many)]}"#)
            Issue.record("1001 notifications were taken")
        } catch {
            #expect(error.detail.contains("1001"))
        }
        let thousand = Array(repeating: one, count: 1000).joined(separator: ",")
        #expect(try Self.read(#"{"notifications":[\#(thousand)]}"#).accepted.count == 1000)
    }

    @Test func aStoredTemplateIsFilledFromTheFields() throws {
        let template = try ServiceTemplate(
            name: "shipped",
            text: Array(#"{"aps":{"alert":"Order {{order}} shipped, {{name}}"}}"#.utf8)
        )
        #expect(template.fields.sorted() == ["name", "order"])
        let batch = try Self.read(
            #"""
            {"notifications":[{"token":"\#(Self.token)","template":"shipped","fields":{"order":"42","name":"A \"B\""}},
            {"token":"\#(Self.token)","template":"shipped","fields":{"order":"43"}}]}
            """#,
            templates: ["shipped": template]
        )
        let first = try #require(batch.accepted.first)
        #expect(String(decoding: first.payload, as: UTF8.self) == #"{"aps":{"alert":"Order 42 shipped, A \"B\""}}"#)
        guard case .refused(let error) = batch.items[1] else {
            Issue.record("a notification missing a field was taken")
            return
        }
        #expect(error.field == "notifications[1].fields.name")
    }

    @Test func problemsAreProblemDetails() throws {
        let problem = ServiceProblem(.queueFull, detail: "full", retryAfter: 1)
        let value = try JSONValue.parse(problem.json).value
        #expect(value["type"] == .string("https://salvo.dev/problems/queue-full"))
        #expect(value["status"] == .number("429"))
        #expect(value["title"] != nil)
    }
}
