import APNSWire

/// What a webhook can subscribe to (`serve --webhook URL events=…`).
public enum WebhookKind: String, Sendable, Hashable, CaseIterable, Comparable {
    /// A token the push service called gone: HTTP/2 410 `Unregistered` or `ExpiredToken`, binary `InvalidToken`.
    case gone
    /// A notification the push service refused for another reason (its status and reason).
    case refused
    /// The final outcome of a transactional notification that asked for it (`"webhook": true`).
    case outcome
    /// A campaign's change of state.
    case campaign

    /// The event's `type` in the body a receiver gets.
    public var eventType: String {
        switch self {
        case .gone: "token.gone"
        case .refused: "push.refused"
        case .outcome: "notification.outcome"
        case .campaign: "campaign.state"
        }
    }

    public static func < (lhs: WebhookKind, rhs: WebhookKind) -> Bool {
        Self.allCases.firstIndex(of: lhs)! < Self.allCases.firstIndex(of: rhs)!
    }

    /// Whether the push service's answer says the token is gone for good (its app uninstalled, its activity
    /// ended, the token invalid): HTTP/2 410 with `Unregistered` or `ExpiredToken`, or the binary `InvalidToken`.
    public static func isGone(status: Int?, reason: String?) -> Bool {
        switch reason {
        case "Unregistered", "ExpiredToken": status == 410
        case "InvalidToken": true
        default: false
        }
    }
}

/// One event of the outbox: an id a receiver drops repeats by (made from what it is about, so that deriving it
/// again makes the same id), its kind, when it happened and what it says (a JSON object).
public struct WebhookEvent: Hashable, Sendable {
    public var id: String
    public var kind: WebhookKind
    /// Milliseconds since 1970.
    public var createdAt: Int64
    /// The event's `data`, a JSON object.
    public var data: JSONValue

    public init(id: String, kind: WebhookKind, createdAt: Int64, data: JSONValue) {
        self.id = id
        self.kind = kind
        self.createdAt = createdAt
        self.data = data
    }

    /// The events a transactional notification's new final state makes: `gone` or `refused` for a refusal with the
    /// push service's status, and `outcome` when the notification asked for it. Ids: `n:<notification>:<kind>`.
    public static func notificationEvents(
        id: String,
        batch: String,
        token: String,
        optedIn: Bool,
        update: OutcomeUpdate
    ) -> [WebhookEvent] {
        guard update.state.isFinal else { return [] }
        var events: [WebhookEvent] = []
        if update.state == .refused, let status = update.status, status > 0 {
            let kind: WebhookKind = Self.kindOfRefusal(status: status, reason: update.reason)
            var members = [
                JSONMember("token", .string(token)), JSONMember("notification", .string(id)),
                JSONMember("status", .int(status)), JSONMember("reason", .string(update.reason ?? "")),
            ]
            if let since = update.unregisteredAt { members.append(JSONMember("unregistered_at", .int(Int(since)))) }
            events.append(
                WebhookEvent(id: "n:\(id):\(kind.rawValue)", kind: kind, createdAt: update.at, data: .object(members))
            )
        }
        if optedIn {
            var members = [
                JSONMember("notification", .string(id)), JSONMember("batch", .string(batch)),
                JSONMember("token", .string(token)), JSONMember("state", .string(update.state.description)),
            ]
            if let status = update.status { members.append(JSONMember("status", .int(status))) }
            if let reason = update.reason { members.append(JSONMember("reason", .string(reason))) }
            if let apnsID = update.apnsID { members.append(JSONMember("apns_id", .string(apnsID))) }
            events.append(
                WebhookEvent(id: "n:\(id):outcome", kind: .outcome, createdAt: update.at, data: .object(members))
            )
        }
        return events
    }

    /// `gone` for a token gone for good, else `refused`.
    public static func kindOfRefusal(status: Int, reason: String?) -> WebhookKind {
        WebhookKind.isGone(status: status, reason: reason) ? .gone : .refused
    }
}

/// Which webhooks take which kinds of event: the endpoints (by their names, the URLs) for each kind. Empty: no
/// webhook, and the store writes no event.
public struct WebhookRoutes: Hashable, Sendable {
    private var endpoints: [WebhookKind: [String]] = [:]

    public init() {}

    /// `subscriptions`: each endpoint's name and the kinds it takes.
    public init(_ subscriptions: [(endpoint: String, kinds: Set<WebhookKind>)]) {
        for subscription in subscriptions {
            for kind in subscription.kinds.sorted() { self.endpoints[kind, default: []].append(subscription.endpoint) }
        }
    }

    public var isEmpty: Bool { self.endpoints.isEmpty }

    /// The endpoints that take `kind`, in the order they were given.
    public func endpoints(for kind: WebhookKind) -> [String] { self.endpoints[kind] ?? [] }

    /// Whether any endpoint takes `kind`.
    public func takes(_ kind: WebhookKind) -> Bool { self.endpoints[kind] != nil }
}
