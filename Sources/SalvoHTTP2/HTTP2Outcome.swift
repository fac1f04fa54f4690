import APNSWire

/// What a response means for its row: the mapping from status and reason to what the job does next.
///
/// Pure, so every response class is tested without a connection.
public enum HTTP2Outcome: Hashable, Sendable {
    /// 200: accepted; the service's `apns-id` for the notification.
    case delivered(apnsID: String?)
    /// 400, 403, 404, 405, 413 and unknown statuses, and a reason on Apple's never-retry list whatever its status
    /// (`APNSReason.neverRetried`): the request itself was refused.
    case rejected(status: Int, reason: APNSReason)
    /// 410 (`Unregistered`, `ExpiredToken`): the token is no longer active; since `timestamp` (milliseconds since
    /// 1970) when the service gave one. `reason` is the one answered (`Unregistered` when the body named none).
    case unregistered(timestamp: Int64?, reason: APNSReason)
    /// 429, 500, 503 (and `IdleTimeout`): try again later, not before `retryAfter` seconds when given.
    case retry(status: Int, reason: APNSReason, retryAfter: Int64?)
    /// 403 `ExpiredProviderToken`: renew the token (once) and send again.
    case expiredProviderToken
    /// The provider token was refused (`APNSReason.refusesTheProviderToken`: `InvalidProviderToken`,
    /// `MissingProviderToken`, `TooManyProviderTokenUpdates`, `UnrelatedKeyIdInToken`,
    /// `BadEnvironmentKeyIdInToken`): the request went no further than the token check, so the device never saw
    /// it. Never a rejection of the row: the job stops, and the row is unsent.
    case providerTokenRefused(status: Int, reason: APNSReason)
    /// The credentials or environment are wrong (`APNSReason.stopsTheJob`): every request would fail alike.
    case stopJob(status: Int, reason: APNSReason)

    /// Maps a response.
    ///
    /// - Parameters:
    ///   - status: the `:status` value.
    ///   - apnsID: the `apns-id` response header.
    ///   - body: the response body (JSON with a `reason`, or empty).
    ///   - retryAfter: the `Retry-After` header, when it held a number of seconds.
    public init(status: Int, apnsID: String?, body: [UInt8], retryAfter: Int64?) {
        if status == 200 {
            self = .delivered(apnsID: apnsID)
            return
        }
        let parsed = APNSErrorBody(jsonBytes: body)
        let reason = parsed?.reason ?? APNSReason(rawValue: "HTTP \(status)")
        if status == 410 || reason.meansTheTokenIsGone {
            self = .unregistered(
                timestamp: parsed?.timestamp,
                reason: reason.meansTheTokenIsGone ? reason : .unregistered
            )
        } else if reason == .expiredProviderToken {
            self = .expiredProviderToken
        } else if reason.refusesTheProviderToken {
            self = .providerTokenRefused(status: status, reason: reason)
        } else if reason.stopsTheJob {
            self = .stopJob(status: status, reason: reason)
        } else if reason.isNeverRetried {
            self = .rejected(status: status, reason: reason)
        } else if status == 429 || status == 500 || status == 503 || reason.isRetryable {
            self = .retry(status: status, reason: reason, retryAfter: retryAfter)
        } else {
            self = .rejected(status: status, reason: reason)
        }
    }
}

extension APNSReason {
    /// Whether the service refused the request's provider token rather than the notification: checked before
    /// anything else, so the notification never went further. `ExpiredProviderToken` is renewed and sent again;
    /// when it cannot be, it is such a refusal too. `UnrelatedKeyIdInToken` (the token's key is not the one the
    /// connection started with) and `BadEnvironmentKeyIdInToken` (a key of the other environment) are refusals of
    /// the job's credentials: every row would earn them, so the job stops rather than retry.
    public var refusesTheProviderToken: Bool {
        self == .invalidProviderToken || self == .missingProviderToken || self == .tooManyProviderTokenUpdates
            || self == .expiredProviderToken || self == .unrelatedKeyIdInToken || self == .badEnvironmentKeyIdInToken
    }
}
