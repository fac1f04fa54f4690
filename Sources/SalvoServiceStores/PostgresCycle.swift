import APNSWire
import Logging
import NIOCore
import PostgresNIO
import SalvoService

/// One write cycle's statements on a connection inside its transaction, each one statement for all the cycle's rows
/// (their columns bound as arrays): the idempotency keys, the job's outcomes, the rows claimed (oldest first), and the
/// new rows, of which those that fit in the claim's room are stored already handed to this worker. The SQLite
/// store's rules, with leases.
struct PostgresCycle {
    let cycle: StoreCycle
    let worker: String
    let leaseMilliseconds: Int64
    /// The fences of the rows this worker holds.
    let fences: [Int: Int64]
    /// `recover`'s outcomes: applied to rows the recovery locked, whoever held them.
    var recovering = false

    private var result = StoreCycleResult()
    private var claims: [(seq: Int, fence: Int64)] = []
    private var released: [Int] = []
    private var events: [WebhookEvent] = []
    /// Rows this cycle left queued (stored beyond the claim's room, or given back).
    private var queued = 0

    init(cycle: StoreCycle, worker: String, leaseMilliseconds: Int64, fences: [Int: Int64]) {
        self.cycle = cycle
        self.worker = worker
        self.leaseMilliseconds = leaseMilliseconds
        self.fences = fences
    }

    struct Applied: Sendable {
        var result: StoreCycleResult
        /// Rows now this worker's, with the fence of the claim.
        var claims: [(seq: Int, fence: Int64)]
        /// Rows this worker no longer holds: answered, queued again, or taken over.
        var released: [Int]
    }

    private static var logger: Logger { PostgresNotificationStore.logger }

    mutating func apply(_ connection: PostgresConnection) async throws -> Applied {
        let toInsert = try await self.decideKeys(connection)
        try await self.update(connection)
        // Rows queued before these (a backlog, rows given back, rows whose lease expired) go first; the new rows take
        // the room left.
        var room = self.cycle.claim
        if room > 0 {
            try await self.claim(room, connection)
            room -= self.result.claimed.count + self.result.expired.count + self.result.uncertain.count
        }
        try await self.insert(toInsert, claiming: max(0, room), connection)
        try await PostgresCycle.enqueue(self.events, routes: self.cycle.webhooks, connection)
        if self.queued > 0 {
            // Delivered at the commit, to every worker listening: an idle one claims them at once.
            try await connection.query(
                "SELECT pg_notify(\(PostgresNotificationStore.queueChannel), \(self.worker))",
                logger: Self.logger
            )
        }
        return Applied(result: self.result, claims: self.claims, released: self.released)
    }

    // MARK: Idempotency keys

    /// Decides every accept: stored, a replay of its key's first answer, or a conflict. The keys new to the store
    /// are inserted by one statement (`ON CONFLICT DO NOTHING`: a key another worker stored meanwhile is not an
    /// error); those that were there are read by a second. Two requests with one key in the same cycle: the first
    /// decides.
    /// - Returns: the accepts to store.
    private mutating func decideKeys(_ connection: PostgresConnection) async throws -> [PendingAccept] {
        let accepts = self.cycle.accepts
        var first: [String: Int] = [:]
        var keyed: [Int] = []
        for (index, accept) in accepts.enumerated() {
            guard let key = accept.idempotencyKey else { continue }
            let scoped = accept.keyID + "\u{0}" + key
            if first[scoped] == nil {
                first[scoped] = index
                keyed.append(index)
            }
        }
        var earlier: [String: (hash: [UInt8], answer: StoredAnswer)] = [:]
        if !keyed.isEmpty {
            var binds = PostgresBindings(capacity: 6)
            binds.append(keyed.map { accepts[$0].keyID })
            binds.append(keyed.map { accepts[$0].idempotencyKey ?? "" })
            binds.append(keyed.map { ByteBuffer(bytes: accepts[$0].bodyHash) })
            binds.append(keyed.map { Int64(accepts[$0].answer.status) })
            binds.append(keyed.map { ByteBuffer(bytes: accepts[$0].answer.body) })
            binds.append(self.cycle.now)
            let inserted = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO salvo.idempotency (key_id, key, body_hash, status, body, created_at)
                        SELECT k, key, h, s, b, $6 FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[],
                            $5::bytea[]) AS t(k, key, h, s, b)
                        ON CONFLICT (key_id, key) DO NOTHING
                        RETURNING key_id, key
                        """,
                    binds: binds
                ),
                logger: Self.logger
            )
            var new: Set<String> = []
            for try await row in inserted {
                let (keyID, key) = try row.decode((String, String).self)
                new.insert(keyID + "\u{0}" + key)
            }
            let known = keyed.filter { index in
                !new.contains(accepts[index].keyID + "\u{0}" + (accepts[index].idempotencyKey ?? ""))
            }
            if !known.isEmpty {
                // A statement of its own: it sees what another worker committed while the insert waited for it.
                var read = PostgresBindings(capacity: 2)
                read.append(known.map { accepts[$0].keyID })
                read.append(known.map { accepts[$0].idempotencyKey ?? "" })
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT i.key_id, i.key, i.body_hash, i.status, i.body FROM salvo.idempotency i
                            JOIN unnest($1::text[], $2::text[]) AS t(k, key) ON i.key_id = t.k AND i.key = t.key
                            """,
                        binds: read
                    ),
                    logger: Self.logger
                )
                for try await row in rows {
                    let (keyID, key, hash, status, body) = try row.decode(
                        (String, String, ByteBuffer, Int, ByteBuffer).self
                    )
                    earlier[keyID + "\u{0}" + key] = (
                        Array(hash.readableBytesView),
                        StoredAnswer(status: status, body: Array(body.readableBytesView))
                    )
                }
            }
        }
        var toInsert: [PendingAccept] = []
        for (index, accept) in accepts.enumerated() {
            guard let key = accept.idempotencyKey else {
                self.result.accepts.append(.stored)
                toInsert.append(accept)
                continue
            }
            let scoped = accept.keyID + "\u{0}" + key
            if let stored = earlier[scoped] {
                self.result.accepts.append(stored.hash == accept.bodyHash ? .replay(stored.answer) : .conflict)
            } else if let firstIndex = first[scoped], firstIndex != index {
                let decider = accepts[firstIndex]
                self.result.accepts.append(decider.bodyHash == accept.bodyHash ? .replay(decider.answer) : .conflict)
            } else {
                self.result.accepts.append(.stored)
                toInsert.append(accept)
            }
        }
        self.result.stored = toInsert.count
        return toInsert
    }

    // MARK: Outcomes

    /// The outcomes as SQLite applies them one after another: of several for one row, a final one stands and the
    /// ones after it are dropped; otherwise the last one is taken, with every resend counted.
    static func merged(_ outcomes: [OutcomeUpdate]) -> [OutcomeUpdate] {
        var position: [Int: Int] = [:]
        var merged: [OutcomeUpdate] = []
        for outcome in outcomes {
            guard let at = position[outcome.seq] else {
                position[outcome.seq] = merged.count
                merged.append(outcome)
                continue
            }
            guard !merged[at].state.isFinal else { continue }
            let resent = merged[at].uncertainResend
            var next = outcome
            if next.apnsID == nil { next.apnsID = merged[at].apnsID }
            next.uncertainResend = next.uncertainResend || resent
            merged[at] = next
        }
        return merged
    }

    /// Writes the outcomes in one statement. A row already final keeps its outcome; a row this worker no longer
    /// holds (another took it over after its lease expired) refuses it, counted in `fenced`. A row made final here
    /// gets its events in the outbox in the same transaction.
    private mutating func update(_ connection: PostgresConnection) async throws {
        let outcomes = Self.merged(self.cycle.outcomes)
        guard !outcomes.isEmpty else { return }
        var binds = PostgresBindings(capacity: 13)
        binds.append(outcomes.map { Int64($0.seq) })
        binds.append(PostgresNullableArray(outcomes.map { self.fences[$0.seq] }))
        binds.append(outcomes.map { Int64($0.state.rawValue) })
        binds.append(PostgresNullableArray(outcomes.map { $0.status.map(Int64.init) }))
        binds.append(PostgresNullableArray(outcomes.map(\.reason)))
        binds.append(PostgresNullableArray(outcomes.map(\.apnsID)))
        binds.append(PostgresNullableArray(outcomes.map(\.apnsUniqueID)))
        binds.append(PostgresNullableArray(outcomes.map(\.unregisteredAt)))
        binds.append(PostgresNullableArray(outcomes.map { $0.state.isFinal ? $0.at : nil }))
        binds.append(outcomes.map { Int64($0.uncertainResend ? 1 : 0) })
        binds.append(self.worker)
        binds.append(self.recovering)
        binds.append(outcomes.indices.map { Int64($0) })
        // The second part reads the rows as they were before the update (one snapshot for the statement): those
        // another worker holds, or this one under another claim.
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH u AS (
                        SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[],
                            $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $13::bigint[])
                        AS u(seq, fence, state, status, reason, apns_id, apns_unique_id, unregistered_at, answered_at,
                            resend, position)),
                    changed AS (
                        UPDATE salvo.notifications n SET state = u.state, status = u.status, reason = u.reason,
                            apns_id = coalesce(u.apns_id, n.apns_id), apns_unique_id = u.apns_unique_id,
                            unregistered_at = u.unregistered_at, answered_at = u.answered_at,
                            uncertain_resends = n.uncertain_resends + u.resend,
                            worker = CASE WHEN u.state = 0 THEN NULL ELSE n.worker END,
                            lease_until = CASE WHEN u.state = 0 THEN NULL ELSE n.lease_until END
                        FROM u
                        WHERE n.seq = u.seq AND n.state < 2
                            AND ($12 OR (n.worker = $11 AND n.fence = u.fence))
                        RETURNING u.position, n.id, n.batch, n.token, n.webhook, false AS fenced)
                    SELECT * FROM changed
                    UNION ALL
                    SELECT u.position, n.id, n.batch, n.token, n.webhook, true FROM u
                    JOIN salvo.notifications n ON n.seq = u.seq
                    WHERE NOT $12 AND (n.worker IS DISTINCT FROM $11 OR (u.fence IS NOT NULL AND n.fence <> u.fence))
                    """,
                binds: binds
            ),
            logger: Self.logger
        )
        var changed: [(position: Int, id: String, batch: String, token: [UInt8], webhook: Bool)] = []
        for try await row in rows {
            let (position, id, batch, token, webhook, fenced) = try row.decode(
                (Int, String, String, ByteBuffer, Bool, Bool).self
            )
            if fenced {
                self.result.fenced.append(outcomes[position].seq)
            } else {
                changed.append((position, id, batch, Array(token.readableBytesView), webhook))
                if outcomes[position].state == .queued { self.queued += 1 }
            }
        }
        self.result.fenced.sort()
        // Every row answered, queued again or taken over is no longer held as it was.
        self.released += outcomes.filter { $0.state != .sending }.map(\.seq) + self.result.fenced
        guard !self.cycle.webhooks.isEmpty else { return }
        for row in changed.sorted(by: { $0.position < $1.position }) where outcomes[row.position].state.isFinal {
            self.events += WebhookEvent.notificationEvents(
                id: row.id,
                batch: row.batch,
                token: Hex.string(row.token),
                optedIn: row.webhook,
                update: outcomes[row.position]
            )
        }
    }

    // MARK: Claims

    /// Claims up to `count` rows for this worker, oldest first: rows whose lease expired (another worker's, or this
    /// one's from before), then queued rows, each skipping rows another worker has locked. Rows past their
    /// expiration are ended expired rather than handed out; rows taken over are resent (counted as uncertain
    /// resends) or, with `onUncertain` `.report`, ended uncertain.
    private mutating func claim(_ count: Int, _ connection: PostgresConnection) async throws {
        let now = self.cycle.now
        let resend = self.cycle.onUncertain == .resend
        var binds = PostgresBindings(capacity: 5)
        binds.append(now)
        binds.append(Int64(count))
        binds.append(self.worker)
        binds.append(now + self.leaseMilliseconds)
        binds.append(resend)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH overdue AS (
                        SELECT seq, state AS was FROM salvo.notifications
                        WHERE state = 1 AND lease_until < $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED),
                    queued AS (
                        SELECT seq, state AS was FROM salvo.notifications
                        WHERE state = 0 ORDER BY seq LIMIT greatest(0, $2 - (SELECT count(*) FROM overdue))
                        FOR UPDATE SKIP LOCKED),
                    picked AS (SELECT * FROM overdue UNION ALL SELECT * FROM queued)
                    UPDATE salvo.notifications n SET state = 1, sent_at = $1, worker = $3, lease_until = $4,
                        fence = n.fence + 1,
                        uncertain_resends = n.uncertain_resends + CASE WHEN picked.was = 1 AND $5 THEN 1 ELSE 0 END
                    FROM picked WHERE n.seq = picked.seq
                    RETURNING n.seq, n.fence, picked.was, n.id, n.token, n.payload, n.push_type, n.apns_id,
                        n.expiration, n.priority, n.topic, n.collapse_id, n.accepted_at, n.webhook, n.batch
                    """,
                binds: binds
            ),
            logger: Self.logger
        )
        var expired: [(seq: Int, id: String)] = []
        var uncertain: [(seq: Int, id: String)] = []
        let nowSeconds = now / 1000
        for try await row in rows {
            let (
                seq, fence, was, id, tokenBytes, payload, pushType, apnsID, expiration, priority, topic, collapseID,
                acceptedAt, webhook, batch
            ) = try row.decode(
                (
                    Int, Int64, Int, String, ByteBuffer, ByteBuffer, String?, String?, Int64?, Int?, String?, String?,
                    Int64, Bool, String
                ).self
            )
            let token = Array(tokenBytes.readableBytesView)
            if let expiration, expiration > 0, expiration < nowSeconds {
                expired.append((seq, id))
                if webhook, self.cycle.webhooks.takes(.outcome) {
                    self.events += WebhookEvent.notificationEvents(
                        id: id,
                        batch: batch,
                        token: Hex.string(token),
                        optedIn: true,
                        update: OutcomeUpdate(seq: seq, state: .expired, at: now)
                    )
                }
                continue
            }
            if was == 1, !resend {
                uncertain.append((seq, id))
                if webhook, self.cycle.webhooks.takes(.outcome) {
                    var update = OutcomeUpdate(seq: seq, state: .uncertain, at: now)
                    update.reason = Self.leaseExpired
                    self.events += WebhookEvent.notificationEvents(
                        id: id,
                        batch: batch,
                        token: Hex.string(token),
                        optedIn: true,
                        update: update
                    )
                }
                continue
            }
            guard let deviceToken = try? DeviceToken(bytes: token) else { continue }
            let headers = try APNSRequestHeaders(
                pushType: pushType.map { APNSPushType(rawValue: $0) },
                id: apnsID,
                expiration: expiration.map { UInt32(clamping: $0) },
                priority: priority.map { NotificationPriority(rawValue: UInt8(clamping: $0)) },
                topic: topic,
                collapseID: collapseID
            )
            self.result.claimed.append(
                ClaimedRow(
                    seq: seq,
                    acceptedAt: acceptedAt,
                    notification: ServiceNotification(
                        id: id,
                        token: deviceToken,
                        payload: Array(payload.readableBytesView),
                        headers: headers,
                        webhook: webhook
                    )
                )
            )
            self.claims.append((seq, fence))
        }
        // Claimed rows are in the order the statement returned them; the job sends oldest first.
        self.result.claimed.sort { $0.seq < $1.seq }
        expired.sort { $0.seq < $1.seq }
        uncertain.sort { $0.seq < $1.seq }
        self.result.expired += expired
        self.result.uncertain += uncertain
        guard !expired.isEmpty || !uncertain.isEmpty else { return }
        var ends = PostgresBindings(capacity: 4)
        ends.append(expired.map { Int64($0.seq) })
        ends.append(uncertain.map { Int64($0.seq) })
        ends.append(now)
        ends.append(Self.leaseExpired)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    UPDATE salvo.notifications SET state = CASE WHEN seq = ANY($1::bigint[]) THEN 4 ELSE 5 END,
                        reason = CASE WHEN seq = ANY($1::bigint[]) THEN reason ELSE $4 END,
                        answered_at = $3, worker = NULL, lease_until = NULL
                    WHERE seq = ANY($1::bigint[]) OR seq = ANY($2::bigint[])
                    """,
                binds: ends
            ),
            logger: Self.logger
        )
    }

    /// The reason of a row ended uncertain because the worker that held it let its lease expire.
    static let leaseExpired = "UncertainLeaseExpired"

    // MARK: New rows

    /// Stores the accepted notifications, numbered by the table's sequence in the order they came: the first
    /// `room` of them as handed to this worker (`result.claimed`, from the request's own values: only the numbers
    /// are read back), any whose expiration has passed as expired, the others queued. One statement.
    private mutating func insert(
        _ accepts: [PendingAccept],
        claiming room: Int,
        _ connection: PostgresConnection
    ) async throws {
        let now = self.cycle.now
        let nowSeconds = now / 1000
        var room = room
        var rows: [(batch: String, notification: ServiceNotification, state: NotificationState)] = []
        for accept in accepts {
            for notification in accept.notifications {
                let state: NotificationState
                if let expiration = notification.headers.expiration, expiration > 0, Int64(expiration) < nowSeconds {
                    state = .expired
                } else if room > 0 {
                    state = .sending
                    room -= 1
                } else {
                    state = .queued
                    self.queued += 1
                }
                rows.append((accept.batch, notification, state))
            }
        }
        guard !rows.isEmpty else { return }
        let lease = now + self.leaseMilliseconds
        var binds = PostgresBindings(capacity: 17)
        binds.append(rows.map(\.notification.id))
        binds.append(rows.map(\.batch))
        binds.append(rows.map { ByteBuffer(bytes: $0.notification.token.bytes) })
        binds.append(rows.map { ByteBuffer(bytes: $0.notification.payload) })
        binds.append(PostgresNullableArray(rows.map { $0.notification.headers.pushType?.rawValue }))
        binds.append(PostgresNullableArray(rows.map(\.notification.headers.id)))
        binds.append(PostgresNullableArray(rows.map { $0.notification.headers.expiration.map(Int64.init) }))
        binds.append(PostgresNullableArray(rows.map { $0.notification.headers.priority.map { Int64($0.rawValue) } }))
        binds.append(PostgresNullableArray(rows.map(\.notification.headers.topic)))
        binds.append(PostgresNullableArray(rows.map(\.notification.headers.collapseID)))
        binds.append(rows.map { Int64($0.state.rawValue) })
        binds.append(now)
        binds.append(rows.map(\.notification.webhook))
        binds.append(PostgresNullableArray(rows.map { $0.state == .sending ? self.worker : nil }))
        binds.append(PostgresNullableArray(rows.map { $0.state == .sending ? lease : nil }))
        let inserted = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO salvo.notifications (id, batch, token, payload, push_type, apns_id, expiration,
                        priority, topic, collapse_id, state, accepted_at, sent_at, answered_at, webhook, worker,
                        lease_until, fence)
                    SELECT id, batch, token, payload, push_type, apns_id, expiration, priority, topic, collapse_id,
                        state, $12, CASE WHEN state = 1 THEN $12 END, CASE WHEN state = 4 THEN $12 END, webhook,
                        worker, lease_until, CASE WHEN state = 1 THEN 1 ELSE 0 END
                    FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[], $5::text[], $6::text[],
                        $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::bigint[], $13::boolean[],
                        $14::text[], $15::bigint[])
                        WITH ORDINALITY AS t(id, batch, token, payload, push_type, apns_id, expiration, priority, topic,
                            collapse_id, state, webhook, worker, lease_until, position)
                    ORDER BY position
                    RETURNING seq, id
                    """,
                binds: binds
            ),
            logger: Self.logger
        )
        var seqs: [String: Int] = [:]
        seqs.reserveCapacity(rows.count)
        for try await row in inserted {
            let (seq, id) = try row.decode((Int, String).self)
            seqs[id] = seq
        }
        var claimed: [ClaimedRow] = []
        for row in rows {
            let seq = seqs[row.notification.id] ?? 0
            switch row.state {
            case .expired:
                self.result.expired.append((seq, row.notification.id))
                if row.notification.webhook, self.cycle.webhooks.takes(.outcome) {
                    self.events += WebhookEvent.notificationEvents(
                        id: row.notification.id,
                        batch: row.batch,
                        token: row.notification.token.hexString,
                        optedIn: true,
                        update: OutcomeUpdate(seq: seq, state: .expired, at: now)
                    )
                }
            case .sending:
                claimed.append(ClaimedRow(seq: seq, acceptedAt: now, notification: row.notification))
                self.claims.append((seq, 1))
            default:
                break
            }
        }
        self.result.claimed += claimed.sorted { $0.seq < $1.seq }
    }

    // MARK: Outbox

    /// Puts `events` in the outbox for each endpoint that takes its kind, in their order; an event already there
    /// (its endpoint and id) is left as it is. One statement.
    /// - Returns: the rows added.
    @discardableResult
    static func enqueue(
        _ events: [WebhookEvent],
        routes: WebhookRoutes,
        _ connection: PostgresConnection
    ) async throws -> Int {
        var endpoints: [String] = []
        var ids: [String] = []
        var types: [String] = []
        var times: [Int64] = []
        var data: [ByteBuffer] = []
        for event in events {
            let targets = routes.endpoints(for: event.kind)
            guard !targets.isEmpty else { continue }
            let body = ByteBuffer(bytes: event.data.compactBytes)
            for endpoint in targets {
                endpoints.append(endpoint)
                ids.append(event.id)
                types.append(event.kind.eventType)
                times.append(event.createdAt)
                data.append(body)
            }
        }
        guard !endpoints.isEmpty else { return 0 }
        var binds = PostgresBindings(capacity: 5)
        binds.append(endpoints)
        binds.append(ids)
        binds.append(types)
        binds.append(times)
        binds.append(data)
        let result = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO salvo.webhook_outbox (endpoint, event_id, type, created_at, data)
                    SELECT endpoint, event_id, type, created_at, data
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bytea[])
                        WITH ORDINALITY AS t(endpoint, event_id, type, created_at, data, position)
                    ORDER BY position
                    ON CONFLICT (endpoint, event_id) DO NOTHING
                    """,
                binds: binds
            ),
            logger: Self.logger
        ).get()
        return result.metadata.rows ?? 0
    }
}
