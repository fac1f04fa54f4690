import APNSWire

/// A notification the service accepted: checked, its payload rendered, its headers made, with the id the service
/// gave it (a lowercase UUID, which is also its `apns-id` unless the caller chose one).
public struct ServiceNotification: Hashable, Sendable {
    public var id: String
    public var token: DeviceToken
    /// The request body sent to the push service (compact JSON).
    public var payload: [UInt8]
    public var headers: APNSRequestHeaders
    /// The caller wants the final outcome as a webhook event (`"webhook": true`).
    public var webhook: Bool

    public init(
        id: String,
        token: DeviceToken,
        payload: [UInt8],
        headers: APNSRequestHeaders,
        webhook: Bool = false
    ) {
        self.id = id
        self.token = token
        self.payload = payload
        self.headers = headers
        self.webhook = webhook
    }
}

/// What became of a notification so far, as the API names it.
public enum NotificationState: Int, Sendable, CaseIterable, CustomStringConvertible {
    /// Durable, waiting for a connection.
    case queued = 0
    /// Handed to the sending job: it may be on its way to the push service.
    case sending = 1
    /// The push service accepted it (200).
    case delivered = 2
    /// The push service refused it (`status`, `reason`).
    case refused = 3
    /// Its `expiration` passed before it could be sent.
    case expired = 4
    /// It may or may not have reached the push service (its request went unanswered) and, per `--on-uncertain
    /// report`, is not sent again.
    case uncertain = 5

    /// No later state follows.
    public var isFinal: Bool { self.rawValue >= NotificationState.delivered.rawValue }

    public var description: String {
        switch self {
        case .queued: "queued"
        case .sending: "sending"
        case .delivered: "delivered"
        case .refused: "refused"
        case .expired: "expired"
        case .uncertain: "uncertain"
        }
    }
}

/// A notification as the store knows it, for the API's answers.
public struct NotificationRecord: Hashable, Sendable {
    public var id: String
    public var batch: String
    public var token: String
    public var state: NotificationState
    public var status: Int?
    public var reason: String?
    public var apnsID: String?
    public var apnsUniqueID: String?
    /// Since when the token has been inactive (milliseconds since 1970), when the push service said (410).
    public var unregisteredAt: Int64?
    /// Milliseconds since 1970.
    public var acceptedAt: Int64
    public var sentAt: Int64?
    public var answeredAt: Int64?
    /// Times it was sent again because an earlier send may or may not have arrived (a lost connection, a crash).
    public var uncertainResends: Int

    public init(
        id: String,
        batch: String,
        token: String,
        state: NotificationState,
        acceptedAt: Int64
    ) {
        self.id = id
        self.batch = batch
        self.token = token
        self.state = state
        self.acceptedAt = acceptedAt
        self.uncertainResends = 0
    }
}
