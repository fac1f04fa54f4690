import APNSWire
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

@Suite(.tags(.pure), .runs(.pure)) struct OutcomeTests {
    @Test(arguments: [
        (200, HTTP2Outcome.delivered(apnsID: "id")),
        (400, .rejected(status: 400, reason: .badDeviceToken)),
        (400, .rejected(status: 400, reason: .deviceTokenNotForTopic)),
        (400, .rejected(status: 400, reason: .invalidPushType)),
        (404, .rejected(status: 404, reason: .badPath)),
        (405, .rejected(status: 405, reason: .methodNotAllowed)),
        (413, .rejected(status: 413, reason: .payloadTooLarge)),
        (429, .retry(status: 429, reason: .tooManyRequests, retryAfter: nil)),
        (500, .retry(status: 500, reason: .internalServerError, retryAfter: nil)),
        (503, .retry(status: 503, reason: .serviceUnavailable, retryAfter: nil)),
    ])
    func statusesMapToOutcomes(status: Int, expected: HTTP2Outcome) {
        let reason: APNSReason? =
            switch expected {
            case .rejected(_, let reason), .retry(_, let reason, _): reason
            default: nil
            }
        let body = reason.map { APNSErrorBody(reason: $0).jsonBytes } ?? []
        #expect(HTTP2Outcome(status: status, apnsID: "id", body: body, retryAfter: nil) == expected)
    }

    @Test func unregisteredKeepsItsTimestamp() {
        let body = APNSErrorBody(reason: .unregistered, timestamp: 1_700_000_000_123).jsonBytes
        #expect(
            HTTP2Outcome(status: 410, apnsID: nil, body: body, retryAfter: nil)
                == .unregistered(timestamp: 1_700_000_000_123, reason: .unregistered)
        )
        #expect(
            HTTP2Outcome(status: 410, apnsID: nil, body: [], retryAfter: nil)
                == .unregistered(timestamp: nil, reason: .unregistered)
        )
        // ExpiredToken (a Live Activity's token after the activity ended) is a 410 too, and keeps its name.
        let expired = APNSErrorBody(reason: .expiredToken, timestamp: 1_700_000_000_456).jsonBytes
        #expect(
            HTTP2Outcome(status: 410, apnsID: nil, body: expired, retryAfter: nil)
                == .unregistered(timestamp: 1_700_000_000_456, reason: .expiredToken)
        )
    }

    /// Apple's never-retry list: whatever status it comes with, such a reason is the row's answer, never a retry.
    @Test(arguments: APNSReason.neverRetried.sorted { $0.rawValue < $1.rawValue })
    func neverRetriedReasonsAreNotRetried(reason: APNSReason) {
        for status in [reason.status ?? 400, 500, 503] {
            let outcome = HTTP2Outcome(
                status: status,
                apnsID: nil,
                body: APNSErrorBody(reason: reason).jsonBytes,
                retryAfter: nil
            )
            switch outcome {
            case .rejected, .unregistered, .stopJob: break
            default: Issue.record("\(reason) at \(status) is \(outcome)")
            }
        }
        #expect(!reason.isRetryable)
    }

    /// Keys of the wrong environment, or not the connection's first key: the job's credentials are wrong, so the
    /// job stops at once and the row is unsent (as for `InvalidProviderToken`), both as an answer and in a GOAWAY.
    @Test func keyIdRefusalsStopTheJobAndLeaveTheRowUnsent() {
        for reason in [APNSReason.unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken] {
            let body = APNSErrorBody(reason: reason).jsonBytes
            #expect(
                HTTP2Outcome(status: 403, apnsID: nil, body: body, retryAfter: nil)
                    == .providerTokenRefused(status: 403, reason: reason)
            )
            #expect(reason.stopsTheJob && reason.refusesTheProviderToken && !reason.isRetryable)
            let stop = HTTP2ConnectionMachine.stop(for: reason, status: 403)
            #expect(stop.reason == reason.rawValue)
            #expect(stop.message.contains("403 \(reason)"), "\(stop.message)")
        }
    }

    @Test func credentialErrorsStopTheJobAndExpiredTokensRenew() {
        for reason in [APNSReason.badCertificate, .badCertificateEnvironment, .forbidden] {
            let body = APNSErrorBody(reason: reason).jsonBytes
            #expect(
                HTTP2Outcome(status: 403, apnsID: nil, body: body, retryAfter: nil)
                    == .stopJob(status: 403, reason: reason)
            )
        }
        // Refusals of the provider token: the notification went no further, so the row is not rejected.
        for reason in [APNSReason.invalidProviderToken, .missingProviderToken] {
            let body = APNSErrorBody(reason: reason).jsonBytes
            #expect(
                HTTP2Outcome(status: 403, apnsID: nil, body: body, retryAfter: nil)
                    == .providerTokenRefused(status: 403, reason: reason)
            )
        }
        let expired = APNSErrorBody(reason: .expiredProviderToken).jsonBytes
        #expect(HTTP2Outcome(status: 403, apnsID: nil, body: expired, retryAfter: nil) == .expiredProviderToken)
        let updates = APNSErrorBody(reason: .tooManyProviderTokenUpdates).jsonBytes
        #expect(
            HTTP2Outcome(status: 429, apnsID: nil, body: updates, retryAfter: 3)
                == .providerTokenRefused(status: 429, reason: .tooManyProviderTokenUpdates)
        )
        // A body that is not JSON still gives a reason a report can show.
        #expect(
            HTTP2Outcome(status: 418, apnsID: nil, body: Array("teapot".utf8), retryAfter: nil)
                == .rejected(status: 418, reason: APNSReason(rawValue: "HTTP 418"))
        )
    }

    @Test func backoffGrowsIsCappedAndHonoursRetryAfter() {
        let policy = HTTP2RetryPolicy(
            initialDelay: .nanoseconds(100),
            maximumDelay: .nanoseconds(1000),
            maximumAttempts: 5,
            maximumRetryAfter: .seconds(30)
        )
        #expect(policy.delay(attempts: 1, retryAfter: nil, random: 0.999_999) == 99)
        #expect(policy.delay(attempts: 3, retryAfter: nil, random: 0.5) == 200)
        #expect(policy.delay(attempts: 10, retryAfter: nil, random: 0.5) == 500)
        #expect(policy.delay(attempts: 60, retryAfter: nil, random: 1) == 1000)
        #expect(policy.delay(attempts: 1, retryAfter: nil, random: 0) == 0)
        #expect(policy.delay(attempts: 1, retryAfter: 2, random: 0.5) == 2_000_000_000)
        #expect(policy.delay(attempts: 1, retryAfter: 3600, random: 0.5) == 30_000_000_000)
        #expect(policy.allowsRetry(after: 4))
        #expect(!policy.allowsRetry(after: 5))
    }
}
