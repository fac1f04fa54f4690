/// The `reason` of an HTTP/2 error response, with the status it comes with.
///
/// A value that keeps reasons the table does not know (`APNSReason(rawValue: "SomethingNew")`), so a report
/// shows what the service said. Conforms to `Error` so request validation can throw the reason it found.
public struct APNSReason: RawRepresentable, Hashable, Sendable, Codable, Error, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    // 400
    public static let badCollapseId = APNSReason(rawValue: "BadCollapseId")
    public static let badDeviceToken = APNSReason(rawValue: "BadDeviceToken")
    public static let badExpirationDate = APNSReason(rawValue: "BadExpirationDate")
    public static let badMessageId = APNSReason(rawValue: "BadMessageId")
    public static let badPriority = APNSReason(rawValue: "BadPriority")
    public static let badTopic = APNSReason(rawValue: "BadTopic")
    public static let deviceTokenNotForTopic = APNSReason(rawValue: "DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNSReason(rawValue: "DuplicateHeaders")
    public static let idleTimeout = APNSReason(rawValue: "IdleTimeout")
    public static let invalidPushType = APNSReason(rawValue: "InvalidPushType")
    public static let missingDeviceToken = APNSReason(rawValue: "MissingDeviceToken")
    public static let missingTopic = APNSReason(rawValue: "MissingTopic")
    public static let payloadEmpty = APNSReason(rawValue: "PayloadEmpty")
    public static let topicDisallowed = APNSReason(rawValue: "TopicDisallowed")
    // 403
    public static let badCertificate = APNSReason(rawValue: "BadCertificate")
    public static let badCertificateEnvironment = APNSReason(rawValue: "BadCertificateEnvironment")
    public static let expiredProviderToken = APNSReason(rawValue: "ExpiredProviderToken")
    public static let forbidden = APNSReason(rawValue: "Forbidden")
    public static let invalidProviderToken = APNSReason(rawValue: "InvalidProviderToken")
    public static let missingProviderToken = APNSReason(rawValue: "MissingProviderToken")
    /// The provider token's key is not the key of the connection's first token (a team-scoped key, then a
    /// topic-specific one, say): the connection is bound to the first key it saw.
    public static let unrelatedKeyIdInToken = APNSReason(rawValue: "UnrelatedKeyIdInToken")
    /// The provider token's key is scoped to the other environment (a sandbox key sent to production).
    public static let badEnvironmentKeyIdInToken = APNSReason(rawValue: "BadEnvironmentKeyIdInToken")
    // 404, 405, 410, 413
    public static let badPath = APNSReason(rawValue: "BadPath")
    public static let methodNotAllowed = APNSReason(rawValue: "MethodNotAllowed")
    public static let unregistered = APNSReason(rawValue: "Unregistered")
    /// 410 as `Unregistered`: the token is no longer valid (a Live Activity's token after the activity ended).
    public static let expiredToken = APNSReason(rawValue: "ExpiredToken")
    public static let payloadTooLarge = APNSReason(rawValue: "PayloadTooLarge")
    // 429
    public static let tooManyProviderTokenUpdates = APNSReason(rawValue: "TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNSReason(rawValue: "TooManyRequests")
    // 500, 503
    public static let internalServerError = APNSReason(rawValue: "InternalServerError")
    public static let serviceUnavailable = APNSReason(rawValue: "ServiceUnavailable")
    public static let shutdown = APNSReason(rawValue: "Shutdown")

    private static let statuses: [APNSReason: Int] = [
        .badCollapseId: 400, .badDeviceToken: 400, .badExpirationDate: 400, .badMessageId: 400, .badPriority: 400,
        .badTopic: 400, .deviceTokenNotForTopic: 400, .duplicateHeaders: 400, .idleTimeout: 400,
        .invalidPushType: 400, .missingDeviceToken: 400, .missingTopic: 400, .payloadEmpty: 400,
        .topicDisallowed: 400, .badCertificate: 403, .badCertificateEnvironment: 403, .expiredProviderToken: 403,
        .forbidden: 403, .invalidProviderToken: 403, .missingProviderToken: 403, .unrelatedKeyIdInToken: 403,
        .badEnvironmentKeyIdInToken: 403, .badPath: 404, .methodNotAllowed: 405, .unregistered: 410,
        .expiredToken: 410, .payloadTooLarge: 413, .tooManyProviderTokenUpdates: 429,
        .tooManyRequests: 429, .internalServerError: 500, .serviceUnavailable: 503, .shutdown: 503,
    ]

    /// Every reason the API documents.
    public static var known: Set<APNSReason> { Set(Self.statuses.keys) }

    /// The HTTP status the service answers with this reason; nil for a reason the table does not know.
    public var status: Int? { Self.statuses[self] }

    /// Whether sending the same request again later can succeed (the service was busy or failing), as
    /// opposed to a refusal of the request itself.
    public var isRetryable: Bool {
        self == .tooManyRequests || self == .internalServerError || self == .serviceUnavailable
            || self == .shutdown || self == .idleTimeout
    }

    /// Whether the whole job should stop: the credentials or environment are wrong, so every request will
    /// fail the same way. `TooManyProviderTokenUpdates` too: the token stays refused until it is 20 minutes
    /// younger than the key's previous one, so retrying each row only repeats the refusal.
    public var stopsTheJob: Bool {
        self == .badCertificate || self == .badCertificateEnvironment || self == .invalidProviderToken
            || self == .missingProviderToken || self == .forbidden || self == .topicDisallowed
            || self == .tooManyProviderTokenUpdates || self == .unrelatedKeyIdInToken
            || self == .badEnvironmentKeyIdInToken
    }

    /// Whether the token is gone for good (410: `Unregistered`, `ExpiredToken`): the row is rejected, and the
    /// token belongs on the unregistered list.
    public var meansTheTokenIsGone: Bool { self == .unregistered || self == .expiredToken }

    /// The reasons Apple says never to retry ("Handling notification responses from APNs"): sending the same
    /// request again can only earn the same answer.
    public static let neverRetried: Set<APNSReason> = [
        .badDeviceToken, .deviceTokenNotForTopic, .forbidden, .expiredToken, .unregistered, .payloadTooLarge,
    ]

    /// Whether this reason is on Apple's never-retry list (`neverRetried`).
    public var isNeverRetried: Bool { Self.neverRetried.contains(self) }

    public var description: String { self.rawValue }
}

/// The JSON body of an HTTP/2 error response: `{"reason":"…","timestamp":…}`; the timestamp (milliseconds
/// since 1970) comes only with 410 Unregistered and tells since when the token has been inactive.
public struct APNSErrorBody: Hashable, Sendable, Codable {
    public var reason: APNSReason
    public var timestamp: Int64?

    public init(reason: APNSReason, timestamp: Int64? = nil) {
        self.reason = reason
        self.timestamp = timestamp
    }

    /// The compact JSON of this body.
    public var jsonBytes: [UInt8] {
        var members = [JSONMember("reason", .string(self.reason.rawValue))]
        if let timestamp = self.timestamp { members.append(JSONMember("timestamp", .number(String(timestamp)))) }
        return JSONValue.object(members).compactBytes
    }

    /// Reads a body; nil when it is not JSON with a string `reason`.
    public init?(jsonBytes: [UInt8]) {
        guard let parsed = try? JSONScanner.parse(jsonBytes), case .string(let reason)? = parsed.value["reason"] else {
            return nil
        }
        self.reason = APNSReason(rawValue: reason)
        if case .number(let literal)? = parsed.value["timestamp"] {
            self.timestamp = Int64(literal) ?? Double(literal).map { Int64($0) }
        } else {
            self.timestamp = nil
        }
    }
}
