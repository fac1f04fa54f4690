import SalvoService
import SalvoTestTraits
import Testing

@testable import SalvoWebhooks

/// The webhooks' decisions as values, with the time and the randomness given: when a failed delivery is tried
/// again (exponential backoff, full jitter, capped), when events are given up on, when a batch goes.
@Suite(.tags(.pure), .runs(.pure)) struct WebhookDecisionTests {
    @Test func theBackoffDoublesFromItsBaseUpToItsCap() {
        let retry = WebhookRetry(policy: .init(base: 1000, cap: 300_000))
        #expect(retry.ceiling(afterFailures: 0) == 0)
        #expect(
            (1...10).map { retry.ceiling(afterFailures: $0) } == [
                1000, 2000, 4000, 8000, 16000, 32000, 64000, 128_000, 256_000, 300_000,
            ]
        )
        #expect(retry.ceiling(afterFailures: 500) == 300_000, "no overflow however long it fails")
    }

    @Test func eachDelayIsDrawnFromZeroToTheCeiling() {
        var retry = WebhookRetry(policy: .init(base: 1000, cap: 5000))
        var asked: [Int64] = []
        // The largest draw each time: the delays are the ceilings.
        var at: Int64 = 10_000
        for _ in 0..<5 {
            let next = retry.failed(now: at) { ceiling in
                asked.append(ceiling)
                return ceiling
            }
            #expect(!retry.mayAttempt(now: next - 1) && retry.mayAttempt(now: next))
            at = next
        }
        #expect(asked == [1000, 2000, 4000, 5000, 5000])
        #expect(at == 10_000 + 1000 + 2000 + 4000 + 5000 + 5000)
        // The smallest draw: at once. A draw out of range is held to it.
        var other = WebhookRetry(policy: .init(base: 1000, cap: 5000))
        #expect(other.failed(now: 7) { _ in 0 } == 7)
        #expect(other.failed(now: 7) { _ in 99_999 } == 7 + 2000)
        #expect(other.failed(now: 7) { _ in -5 } == 7)
        #expect(other.failures == 3)
    }

    @Test func aSuccessStartsTheCountAgain() {
        var retry = WebhookRetry(policy: .init(base: 100, cap: 1000))
        #expect(retry.mayAttempt(now: 0))
        retry.failed(now: 0) { $0 }
        retry.failed(now: 100) { $0 }
        #expect(retry.failures == 2 && retry.nextAttemptAt == 300)
        retry.succeeded()
        #expect(retry.failures == 0 && retry.nextAttemptAt == nil && retry.mayAttempt(now: 0))
        #expect(retry.failed(now: 1000) { $0 } == 1100, "the first delay again")
    }

    @Test func eventsAreGivenUpOnOnceOlderThanTheBound() {
        let retry = WebhookRetry()
        #expect(retry.policy.maximumAge == 72 * 3_600_000 && retry.policy.base == 1000 && retry.policy.cap == 300_000)
        let made: Int64 = 1_000_000
        #expect(!retry.isDead(createdAt: made, now: made))
        #expect(!retry.isDead(createdAt: made, now: made + 72 * 3_600_000 - 1))
        #expect(retry.isDead(createdAt: made, now: made + 72 * 3_600_000))
    }

    @Test func aBatchGoesFullOrWhenItsOldestHasWaited() {
        let batching = WebhookBatching(maximumEvents: 100, maximumWait: 1000)
        #expect(WebhookBatching() == batching, "100 events or 1 s by default")
        #expect(batching.decide(pending: 0, oldestCreatedAt: nil, now: 5000) == .idle)
        #expect(batching.decide(pending: 100, oldestCreatedAt: 5000, now: 5000) == .send)
        #expect(batching.decide(pending: 3, oldestCreatedAt: 5000, now: 5200) == .wait(until: 6000))
        #expect(batching.decide(pending: 3, oldestCreatedAt: 5000, now: 6000) == .send)
        #expect(batching.decide(pending: 1, oldestCreatedAt: 1, now: 6000) == .send, "an old event goes at once")
    }

    @Test func theBodyHoldsEachEventWithItsIDTypeTimeAndData() {
        let body = WebhookDelivery.body([
            OutboxEntry(
                id: "n:1:gone",
                type: "token.gone",
                createdAt: 1_764_400_000_123,
                data: Array(#"{"a":1}"#.utf8),
                attempts: 0
            ),
            OutboxEntry(id: "c:\"x\"", type: "campaign.state", createdAt: 5, data: [], attempts: 2),
        ])
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"events":[{"id":"n:1:gone","type":"token.gone","created_at":"2025-11-29T07:06:40.123Z","#
                + #""data":{"a":1}},{"id":"c:\"x\"","type":"campaign.state","created_at":"1970-01-01T00:00:00.005Z","#
                + #""data":{}}]}"#
        )
    }

    @Test func theSignatureIsHMACSHA256OfTheTimeAndTheBody() {
        let secret = WebhookSecret(bytes: Array("whsec_0123456789abcdef".utf8))
        let body = Array(#"{"events":[]}"#.utf8)
        // Python's hmac.new(secret, b"1764400000." + body, hashlib.sha256).hexdigest().
        let expected = "0fdf500464dca7243fec9ad32c137c09228d4922f7f1e10ddf3452cf681643e2"
        #expect(
            WebhookSignature.value(secret: secret, timestamp: 1_764_400_000, body: body)
                == "t=1764400000,v1=\(expected)"
        )
        let header = "t=1764400000,v1=\(expected)"
        #expect(WebhookSignature.verify(header, body: body, secret: secret, now: 1_764_400_100))
        #expect(!WebhookSignature.verify(header, body: body + [0x20], secret: secret, now: 1_764_400_100))
        #expect(!WebhookSignature.verify(header, body: body, secret: secret, now: 1_764_400_301), "too old")
        let other = WebhookSecret(bytes: Array("another secret, long enough".utf8))
        #expect(!WebhookSignature.verify(header, body: body, secret: other, now: 1_764_400_000))
        #expect("\(secret)" == "<webhook secret>", "a secret is never shown")
    }

    @Test func theWebhookOptionIsAURLAndTheKindsItTakes() throws {
        let all = try WebhookEndpoint.parse("https://hooks.example.com/salvo")
        #expect(all.url == "https://hooks.example.com/salvo" && all.kinds == Set(WebhookKind.allCases))
        let some = try WebhookEndpoint.parse("http://127.0.0.1:9000/h?key=s3cret events=gone,refused")
        #expect(some.kinds == [.gone, .refused])
        #expect(some.label == "http://127.0.0.1:9000/h", "no query in logs and metrics")
        let routes = WebhookEndpoint.routes([all, some])
        #expect(routes.endpoints(for: .gone) == [all.url, some.url])
        #expect(routes.endpoints(for: .campaign) == [all.url])
        #expect(WebhookRoutes().isEmpty && !routes.isEmpty)

        func refusal(_ text: String) -> String {
            do {
                _ = try WebhookEndpoint.parse(text)
                return ""
            } catch {
                return error.message
            }
        }
        #expect(refusal("ftp://example.com/x").contains("not an http:// or https:// URL"))
        #expect(refusal("hooks.example.com").contains("not an http:// or https:// URL"))
        #expect(refusal("https:///path").contains("has no host"))
        #expect(refusal("https://example.com/#top").contains("no #fragment"))
        #expect(refusal("https://example.com events=gone,lost").contains(#"unknown event kind "lost""#))
        #expect(refusal("https://example.com events=").contains(#"unknown event kind """#))
        #expect(refusal("https://example.com gone").contains("is not understood"))
        #expect(refusal("").contains("needs a URL"))
    }

    @Test func goneIs410UnregisteredOrExpiredTokenOrTheBinaryInvalidToken() {
        #expect(WebhookKind.isGone(status: 410, reason: "Unregistered"))
        #expect(WebhookKind.isGone(status: 410, reason: "ExpiredToken"))
        #expect(WebhookKind.isGone(status: 8, reason: "InvalidToken"))
        #expect(!WebhookKind.isGone(status: 400, reason: "BadDeviceToken"))
        #expect(!WebhookKind.isGone(status: 400, reason: "Unregistered"))
        #expect(WebhookEvent.kindOfRefusal(status: 400, reason: "DeviceTokenNotForTopic") == .refused)
    }

    @Test func aNotificationsOutcomeMakesItsEvents() {
        var refused = OutcomeUpdate(seq: 1, state: .refused, at: 77)
        refused.status = 410
        refused.reason = "Unregistered"
        refused.unregisteredAt = 66
        let both = WebhookEvent.notificationEvents(id: "n1", batch: "b", token: "ab", optedIn: true, update: refused)
        #expect(both.map(\.id) == ["n:n1:gone", "n:n1:outcome"])
        #expect(both.map(\.kind) == [.gone, .outcome])
        #expect(both[0].data["unregistered_at"] == .int(66) && both[0].createdAt == 77)
        var delivered = OutcomeUpdate(seq: 2, state: .delivered, at: 5)
        delivered.status = 200
        #expect(
            WebhookEvent.notificationEvents(id: "n2", batch: "b", token: "ab", optedIn: false, update: delivered)
                .isEmpty
        )
        #expect(
            WebhookEvent.notificationEvents(id: "n2", batch: "b", token: "ab", optedIn: true, update: delivered)
                .map(\.kind) == [.outcome]
        )
        let queued = OutcomeUpdate(seq: 3, state: .queued, at: 5)
        #expect(
            WebhookEvent.notificationEvents(id: "n3", batch: "b", token: "ab", optedIn: true, update: queued).isEmpty
        )
    }
}
