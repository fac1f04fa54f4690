import APNSWire
import SalvoRows

/// Where the service keeps what it accepted, durably: the notifications and their outcomes, idempotency keys and
/// their first answers, stored templates and API keys. One node keeps them in a file (`SQLiteNotificationStore`);
/// a fleet would keep them in a shared database behind the same interface.
///
/// Writes come in cycles (`write`): one transaction, made durable once, holds every request's notifications that
/// arrived since the last cycle, the outcomes the sending job reported, and the rows handed to it next. However
/// many requests arrive at once, they share one sync.
public protocol NotificationStore: Sendable {
    /// Applies `cycle` in one durable transaction.
    func write(_ cycle: StoreCycle) async throws(StoreFailure) -> StoreCycleResult

    /// After a restart: the rows handed to a sending job that never reported them, each settled by its mark
    /// (`marks`: nil when there are none, and every such row counts as written). Never written: queued again. Answered
    /// before the store heard: the answer recorded. Written and unanswered, it may have reached the push service:
    /// with `.resend` it is queued again and counted as an uncertain resend; with `.report` it ends uncertain.
    ///
    /// - Returns: the rows found so, and the notifications not final (the queue's depth).
    /// With `webhooks`, the rows it makes final get their events in the outbox in the same transaction.
    func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?,
        webhooks: WebhookRoutes
    ) async throws(StoreFailure) -> StoreRecovery

    /// The notifications with these ids that exist, in no particular order.
    func notifications(ids: [String]) async throws(StoreFailure) -> [NotificationRecord]

    /// A batch's notifications in the order they were posted; empty when there is no such batch.
    func batch(_ id: String) async throws(StoreFailure) -> [NotificationRecord]

    func template(named name: String) async throws(StoreFailure) -> ServiceTemplate?
    func allTemplates() async throws(StoreFailure) -> [ServiceTemplate]
    func putTemplate(_ template: ServiceTemplate, now: Int64) async throws(StoreFailure)
    /// - Returns: whether there was such a template.
    func deleteTemplate(named name: String) async throws(StoreFailure) -> Bool

    func apiKeys() async throws(StoreFailure) -> [APIKeyRecord]
    func addAPIKey(_ key: APIKeyRecord) async throws(StoreFailure)
    /// - Returns: whether a key with this id was active.
    func revokeAPIKey(id: String, now: Int64) async throws(StoreFailure) -> Bool

    /// Forgets idempotency keys first used before `before` (milliseconds since 1970).
    func forgetIdempotencyKeys(before: Int64) async throws(StoreFailure)

    /// Whether the store can still write (a small write, made durable).
    func checkWritable() async throws(StoreFailure)

    /// How long a row handed to this worker is its own before another worker may take it over (`--lease-seconds`);
    /// nil: the store has no leases (one node's store, where no other worker could take a row over).
    var lease: Duration? { get }

    /// How often the service renews the leases of the rows it was handed (`renewLeases`); nil without leases.
    var leaseRenewal: Duration? { get }

    /// Extends the leases of the rows `seqs` this worker was handed and still holds to `now` plus the lease, so that
    /// no other worker takes over a row whose answer is merely slow. A row another worker took over is not this
    /// worker's any more and is left alone.
    /// - Returns: the rows of `seqs` it holds, and the new end of their leases.
    func renewLeases(_ seqs: Set<Int>, now: Int64) async throws(StoreFailure) -> LeaseRenewal

    /// Calls `wake` (from any thread) whenever another worker of a shared store leaves rows queued, until the store
    /// closes, so that an idle worker claims them at once rather than at its next poll. Returns at once; a store of
    /// one node has no other worker and never calls it.
    func watchQueue(_ wake: @escaping @Sendable () -> Void)

    func close() async
}

extension NotificationStore {
    /// No leases: one node's store.
    public var lease: Duration? { nil }

    public var leaseRenewal: Duration? { self.lease.map { $0 / 3 } }

    public func renewLeases(_ seqs: Set<Int>, now: Int64) async throws(StoreFailure) -> LeaseRenewal {
        LeaseRenewal(held: [], until: now)
    }

    public func watchQueue(_ wake: @escaping @Sendable () -> Void) {}

    /// `recover` with no webhook.
    public func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?
    ) async throws(StoreFailure) -> StoreRecovery {
        try await self.recover(onUncertain: onUncertain, now: now, marks: marks, webhooks: WebhookRoutes())
    }
}

/// What a renewal of a worker's leases found: the rows the worker still holds, and the new end of their leases.
public struct LeaseRenewal: Hashable, Sendable {
    /// Sequence numbers of the rows held (being sent, stamped with this worker, under the fence of its claim).
    public var held: Set<Int>
    /// Milliseconds since 1970.
    public var until: Int64

    public init(held: Set<Int>, until: Int64) {
        self.held = held
        self.until = until
    }
}

/// Everything the service keeps in its store: notifications, campaigns' records and the webhooks' outbox, behind one
/// object (`SQLiteNotificationStore` for one node, a shared database's store for a fleet).
public typealias ServiceStore = NotificationStore & CampaignStore & WebhookOutbox

/// Why the store failed: the file and what went wrong.
public struct StoreFailure: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { self.message }
}

/// What one write cycle holds.
public struct StoreCycle: Sendable {
    public var accepts: [PendingAccept] = []
    public var outcomes: [OutcomeUpdate] = []
    /// Queued rows to hand to the sending job (oldest first), at most.
    public var claim = 0
    /// Milliseconds since 1970.
    public var now: Int64
    /// The webhooks that take events: the outcomes made final by this cycle put theirs in the outbox in it.
    public var webhooks = WebhookRoutes()
    /// What a shared store does with a row whose lease another worker let expire (it may have been sent): claim it
    /// again (`.resend`, counted as an uncertain resend) or end it uncertain (`.report`). A store of one node has no
    /// leases and ignores it.
    public var onUncertain = OnUncertain.resend

    public init(now: Int64) { self.now = now }
}

/// A request's accepted notifications, to store with the answer it gets (for its idempotency key).
public struct PendingAccept: Sendable {
    /// The API key that posted it (idempotency keys are per API key).
    public var keyID: String
    public var idempotencyKey: String?
    /// SHA-256 of the request's body: the same key with another body is a conflict.
    public var bodyHash: [UInt8]
    public var batch: String
    public var notifications: [ServiceNotification]
    /// The answer the request gets once stored, and any retry of it with the same key.
    public var answer: StoredAnswer

    public init(
        keyID: String,
        idempotencyKey: String?,
        bodyHash: [UInt8],
        batch: String,
        notifications: [ServiceNotification],
        answer: StoredAnswer
    ) {
        self.keyID = keyID
        self.idempotencyKey = idempotencyKey
        self.bodyHash = bodyHash
        self.batch = batch
        self.notifications = notifications
        self.answer = answer
    }
}

/// An HTTP answer kept for an idempotency key.
public struct StoredAnswer: Hashable, Sendable {
    public var status: Int
    public var body: [UInt8]

    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// What became of a pending accept.
public enum AcceptResult: Hashable, Sendable {
    /// Stored, durable: its answer stands.
    case stored
    /// Its idempotency key was used before with the same body: that request's answer; nothing was stored.
    case replay(StoredAnswer)
    /// Its idempotency key was used before with another body: nothing was stored.
    case conflict
}

/// A row's new state, as the sending job reported it (or the service decided: expired, queued again).
public struct OutcomeUpdate: Hashable, Sendable {
    public var seq: Int
    public var state: NotificationState
    public var status: Int?
    public var reason: String?
    public var apnsID: String?
    public var apnsUniqueID: String?
    public var unregisteredAt: Int64?
    /// Milliseconds since 1970.
    public var at: Int64
    /// The row goes again because an earlier send of it may or may not have arrived (counted).
    public var uncertainResend = false

    public init(seq: Int, state: NotificationState, at: Int64) {
        self.seq = seq
        self.state = state
        self.at = at
    }
}

/// A row handed to the sending job.
public struct ClaimedRow: Sendable {
    /// The store's sequence number: the row's `line` in the sending job.
    public var seq: Int
    /// When it was accepted (milliseconds since 1970), for the end-to-end latency.
    public var acceptedAt: Int64
    public var notification: ServiceNotification

    public init(seq: Int, acceptedAt: Int64, notification: ServiceNotification) {
        self.seq = seq
        self.acceptedAt = acceptedAt
        self.notification = notification
    }
}

public struct StoreCycleResult: Sendable {
    /// One per pending accept, in order.
    public var accepts: [AcceptResult] = []
    /// The rows handed to the sending job, oldest first (rows whose expiration had passed are not among them).
    public var claimed: [ClaimedRow] = []
    /// Rows found expired when claimed: now final (`expired`).
    public var expired: [(seq: Int, id: String)] = []
    /// Notifications stored by this cycle (the pending accepts that were `stored`).
    public var stored = 0
    /// Rows of outcomes the store refused because this worker no longer holds them: their lease expired and another
    /// worker claimed them (a shared store's fencing). The caller stops sending them. Always empty for one node.
    public var fenced: [Int] = []
    /// Rows whose lease another worker let expire, ended `uncertain` by this cycle's claim (`onUncertain` `.report`):
    /// now final.
    public var uncertain: [(seq: Int, id: String)] = []

    public init() {}
}

public struct StoreRecovery: Hashable, Sendable {
    /// Rows written and unanswered when the service stopped: queued again (`.resend`) or ended uncertain.
    public var uncertain = 0
    /// Rows handed to the job and never written: queued again, without doubt.
    public var neverWritten = 0
    /// Rows answered before the store heard: their answers recorded.
    public var answered = 0
    /// Notifications not final: queued, or being sent.
    public var depth = 0

    public init() {}

    /// The restart rule for one row a sending job was handed and never reported, by its `mark`: never written,
    /// queued again; answered before the store heard, its answer; written and unanswered, queued again as an
    /// uncertain resend or, with `.report`, ended uncertain. Counted here; every store settles its rows so.
    /// - Returns: the row's outcome, to be written as the job's answers are.
    public mutating func settle(seq: Int, mark: RowMark, onUncertain: OnUncertain, now: Int64) -> OutcomeUpdate {
        var update = OutcomeUpdate(seq: seq, state: .queued, at: now)
        switch mark.state {
        case .none:
            self.neverWritten += 1
        case .confirmed:
            self.answered += 1
            update.state = .delivered
            update.status = 200
        case .rejected:
            self.answered += 1
            update.state = .refused
            update.status = mark.status
            update.reason = mark.reason ?? "Refused"
        case .written, .presumed, .expired:
            self.uncertain += 1
            if onUncertain == .resend {
                update.uncertainResend = true
            } else {
                update.state = .uncertain
                update.reason = "UncertainAfterRestart"
            }
        }
        return update
    }
}

/// An API key as stored: only a hash of the key itself.
public struct APIKeyRecord: Hashable, Sendable {
    public var id: String
    public var name: String
    /// SHA-256 of the key.
    public var hash: [UInt8]
    public var createdAt: Int64
    public var revokedAt: Int64?

    public init(id: String, name: String, hash: [UInt8], createdAt: Int64, revokedAt: Int64? = nil) {
        self.id = id
        self.name = name
        self.hash = hash
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
