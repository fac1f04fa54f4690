/// Where the events for webhooks wait until their receiver acknowledges them (a 2xx answer), durably: a receiver
/// that is down loses nothing, and a restart of the service carries on from the outbox. Each event is kept once per
/// endpoint that takes its kind, by its id: putting the same event in again changes nothing, so that events derived
/// again after a restart make no repeat. One node keeps the outbox in the notifications' SQLite file
/// (`SQLiteNotificationStore`, in the very transaction that writes a notification's outcome); a shared database would
/// keep it behind the same interface.
public protocol WebhookOutbox: Sendable {
    /// Puts `events` in the outbox for every endpoint of `routes` that takes each one's kind, each kept once per
    /// endpoint and id; with `source`, records in the same transaction that the events of `source.name` were derived
    /// from what `source.signature` names (`derivedSignature(of:)`).
    ///
    /// - Returns: how many events were new to the outbox (counted once per endpoint).
    @discardableResult
    func enqueue(
        _ events: [WebhookEvent],
        routes: WebhookRoutes,
        source: (name: String, signature: String)?
    ) async throws(StoreFailure) -> Int

    /// What the events of `source` were last derived from, or nil when they never were.
    func derivedSignature(of source: String) async throws(StoreFailure) -> String?

    /// The oldest pending events of `endpoint`, at most `limit`, oldest first.
    func pendingEvents(endpoint: String, limit: Int) async throws(StoreFailure) -> [OutboxEntry]

    /// The receiver acknowledged these events: never sent again.
    func acknowledge(endpoint: String, ids: [String], now: Int64) async throws(StoreFailure)

    /// An attempt to deliver these events failed: counted; the ones in `dead` are given up on (kept, marked dead).
    func failed(endpoint: String, ids: [String], dead: [String], now: Int64) async throws(StoreFailure)

    /// Removes the events of `endpoint` that were delivered or given up on before `endedBefore` (milliseconds since
    /// 1970), so that the outbox holds what is pending and the recent past; pending events are never removed.
    ///
    /// - Returns: how many were removed.
    func prune(endpoint: String, endedBefore: Int64) async throws(StoreFailure) -> Int

    /// How many events of `endpoint` are pending.
    func pendingCount(endpoint: String) async throws(StoreFailure) -> Int

    /// Pending, delivered and dead events, by endpoint.
    func outboxCounts() async throws(StoreFailure) -> [String: OutboxCounts]
}

/// An event waiting in the outbox for one endpoint.
public struct OutboxEntry: Hashable, Sendable {
    public var id: String
    /// The event's `type` (`token.gone`, …).
    public var type: String
    /// Milliseconds since 1970.
    public var createdAt: Int64
    /// The event's `data`, compact JSON.
    public var data: [UInt8]
    /// Attempts that failed so far.
    public var attempts: Int

    public init(id: String, type: String, createdAt: Int64, data: [UInt8], attempts: Int) {
        self.id = id
        self.type = type
        self.createdAt = createdAt
        self.data = data
        self.attempts = attempts
    }
}

/// An endpoint's events by their state in the outbox.
public struct OutboxCounts: Hashable, Sendable {
    public var pending = 0
    public var delivered = 0
    public var dead = 0

    public init(pending: Int = 0, delivered: Int = 0, dead: Int = 0) {
        self.pending = pending
        self.delivered = delivered
        self.dead = dead
    }

    /// The counts by endpoint from the outbox's rows counted by endpoint and state (0 pending, 1 delivered, 2 dead),
    /// as every store keeps them.
    public static func byEndpoint(_ rows: [(endpoint: String, state: Int, count: Int)]) -> [String: OutboxCounts] {
        var counts: [String: OutboxCounts] = [:]
        for (endpoint, state, count) in rows {
            switch state {
            case 0: counts[endpoint, default: OutboxCounts()].pending = count
            case 1: counts[endpoint, default: OutboxCounts()].delivered = count
            default: counts[endpoint, default: OutboxCounts()].dead = count
            }
        }
        return counts
    }
}
