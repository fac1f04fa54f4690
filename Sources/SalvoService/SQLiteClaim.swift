import APNSWire
import GRDB
import GRDBSQLite

/// What one cycle of the embedded store hands to the sending job, oldest first, within its room: rows given back
/// (queued again by their outcome), then queued rows after the cursor (a backlog), then the cycle's new rows. A row
/// whose expiration has passed is not handed out but made final (`expired`), with its webhook event.
struct SQLiteClaim {
    /// Rows it may still hand out.
    private(set) var room: Int
    let now: Int64
    let webhooks: WebhookRoutes
    private(set) var claimed: [ClaimedRow] = []
    private(set) var expired: [(seq: Int, id: String)] = []
    private var events: [WebhookEvent] = []
    /// Rows to write expired at `finish` (not while a statement walks the outcomes).
    private var toExpire: [Int] = []

    init(room: Int, now: Int64, webhooks: WebhookRoutes) {
        self.room = room
        self.now = now
        self.webhooks = webhooks
    }

    private var nowSeconds: Int64 { self.now / 1000 }

    private func hasExpired(_ notification: ServiceNotification) -> Bool {
        guard let expiration = notification.headers.expiration, expiration > 0 else { return false }
        return Int64(expiration) < self.nowSeconds
    }

    /// Hands out rows given back (their outcome says queued), oldest first.
    mutating func givenBack(_ requests: inout SQLiteRequestRows, _ db: Database) throws {
        guard self.room > 0 else { return }
        let take = try SQLiteNotificationStore.statement(
            """
            UPDATE outcomes SET state = 1, sent_at = ?
            WHERE seq IN (SELECT seq FROM outcomes WHERE state = 0 ORDER BY seq LIMIT ?) RETURNING seq
            """,
            db
        )
        take.bind(1, Int(self.now))
        take.bind(2, self.room)
        var seqs: [Int] = []
        while try take.next() { seqs.append(take.int(0) ?? 0) }
        for seq in seqs.sorted() {
            guard let (request, notification) = try requests.row(holding: seq, db) else {
                throw StoreFailure("the queued row \(seq) belongs to no request")
            }
            self.room -= 1
            if self.hasExpired(notification) {
                self.expire(seq: seq, batch: request.batch, notification)
            } else {
                self.claimed.append(ClaimedRow(seq: seq, acceptedAt: request.acceptedAt, notification: notification))
            }
        }
    }

    /// Hands out queued rows after `cursor`, up to `last`, oldest first; rows there that already have an outcome
    /// (stored expired) are passed over.
    /// - Returns: the new cursor.
    mutating func queued(after cursor: Int, through last: Int, _ db: Database) throws -> Int {
        guard self.room > 0 else { return cursor }
        let requests = try SQLiteNotificationStore.statement(
            """
            SELECT \(SQLiteRequestRow.columns) FROM requests
            WHERE first_seq >= coalesce((SELECT max(first_seq) FROM requests WHERE first_seq <= ?1), 0)
            ORDER BY first_seq
            """,
            db
        )
        let outcomes = try SQLiteNotificationStore.statement(
            "SELECT seq FROM outcomes WHERE seq > ? ORDER BY seq",
            db
        )
        requests.bind(1, cursor + 1)
        outcomes.bind(1, cursor)
        var final = try outcomes.next() ? outcomes.int(0) : nil
        var cursor = cursor
        walk: while try requests.next() {
            let request = try SQLiteRequestRow(statement: requests)
            for seq in request.seqs where seq > cursor {
                guard self.room > 0, seq <= last else { break walk }
                while let known = final, known < seq { final = try outcomes.next() ? outcomes.int(0) : nil }
                cursor = seq
                if final == seq { continue }
                let notification = request.notifications[seq - request.firstSeq]
                self.room -= 1
                if self.hasExpired(notification) {
                    self.expire(seq: seq, batch: request.batch, notification)
                } else {
                    self.claimed.append(
                        ClaimedRow(seq: seq, acceptedAt: request.acceptedAt, notification: notification)
                    )
                }
            }
        }
        sqlite3_reset(requests.statement)
        sqlite3_reset(outcomes.statement)
        return cursor
    }

    /// A new row: stored expired when its expiration has passed, else handed out while there is room.
    /// - Returns: whether the row is not queued (handed out or expired).
    mutating func take(seq: Int, batch: String, _ notification: ServiceNotification, _ db: Database) throws -> Bool {
        if self.hasExpired(notification) {
            self.expire(seq: seq, batch: batch, notification)
            return true
        }
        guard self.room > 0 else { return false }
        self.room -= 1
        self.claimed.append(ClaimedRow(seq: seq, acceptedAt: self.now, notification: notification))
        return true
    }

    private mutating func expire(seq: Int, batch: String, _ notification: ServiceNotification) {
        self.toExpire.append(seq)
        self.expired.append((seq, notification.id))
        if notification.webhook, self.webhooks.takes(.outcome) {
            self.events += WebhookEvent.notificationEvents(
                id: notification.id,
                batch: batch,
                token: notification.token.hexString,
                optedIn: true,
                update: OutcomeUpdate(seq: seq, state: .expired, at: self.now)
            )
        }
    }

    /// Writes the expired rows' outcomes, puts their events in the outbox and orders the rows handed out (the job
    /// sends oldest first).
    mutating func finish(_ db: Database) throws {
        if !self.toExpire.isEmpty {
            let expire = try SQLiteNotificationStore.statement(
                """
                INSERT INTO outcomes (seq, state, answered_at) VALUES (?, 4, ?)
                ON CONFLICT (seq) DO UPDATE SET state = 4, answered_at = excluded.answered_at WHERE outcomes.state < 2
                """,
                db
            )
            for seq in self.toExpire {
                expire.bind(1, seq)
                expire.bind(2, Int(self.now))
                try expire.run()
            }
            self.toExpire = []
        }
        try SQLiteNotificationStore.enqueue(self.events, routes: self.webhooks, db)
        self.events = []
        // Rows given back come first; the rest are in order already (a sort would move every row).
        let ordered = self.claimed.indices.dropFirst().allSatisfy { self.claimed[$0 - 1].seq < self.claimed[$0].seq }
        if !ordered { self.claimed.sort { $0.seq < $1.seq } }
    }
}
