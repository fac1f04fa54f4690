import APNSWire
import Foundation
import GRDB
import GRDBSQLite
import SalvoRows
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The store of one node: an SQLite file (`DIR/salvo.sqlite`) in write-ahead-log mode with `synchronous=FULL`, so
/// that a committed cycle survives the process being killed and the machine losing power.
///
/// SQLite rather than the row journal's format: the service looks notifications up by id and batch, keeps
/// idempotency keys, templates and API keys, and forgets old rows, all of which an indexed file does for it; the
/// cost that matters, a sync per write, is shared by every request of a cycle (docs/service.md gives the numbers).
///
/// Through GRDB's `DatabasePool`: one connection writes, on a serial queue of its own, so that a whole cycle is one
/// piece of work on one thread (its statements prepared once and kept); others read at the same time, WAL letting
/// them see the last committed state while a cycle is written. No query runs on the concurrency pool: an `async`
/// read or write suspends its caller until GRDB's queue has done it.
public final class SQLiteNotificationStore: NotificationStore {
    public let path: String
    private let pool: DatabasePool
    /// Copies the log into the database file beside the writer (`SQLiteCheckpointer`), never in a cycle's commit.
    private let checkpointer: SQLiteCheckpointer
    /// The highest sequence number given to a row. Rows get theirs from here, not from SQLite, so that a cycle
    /// knows the rows it stores without reading them back (changed only inside a write, which GRDB runs one at a
    /// time).
    private let lastSeq: Mutex<Int>

    /// The schema this code reads and writes: 1, the notifications, keys and templates; 2 adds the campaigns; 3 the
    /// webhooks' outbox and a notification's wish for its outcome's event.
    static let schemaVersion = 3

    /// Opens (creating it if needed) the store in `directory`.
    public static func open(directory: String) async throws(StoreFailure) -> SQLiteNotificationStore {
        let path = directory + "/salvo.sqlite"
        return try await BlockingWork.run { () throws(StoreFailure) -> SQLiteNotificationStore in
            try Self.makeDirectory(directory)
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            configuration.label = "salvo.store"
            // temp_store=MEMORY keeps a statement's journal (a multi-row statement that may fail midway keeps the
            // pages it changes, to undo the statement alone) in memory: in a file, it was half the writer's system
            // calls.
            // The log hook on every connection (only the writer commits): the commit that takes the log past 1,000
            // pages no longer copies it into the database file and syncs that too; the checkpointer does, beside.
            let checkpointer = SQLiteCheckpointer()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous=FULL; PRAGMA temp_store=MEMORY")
                if let connection = db.sqliteConnection { checkpointer.install(on: connection) }
            }
            do {
                let pool = try DatabasePool(path: path, configuration: configuration)
                do {
                    let last = try pool.write { db in
                        try Self.migrate(db)
                        return try Int.fetchOne(db, sql: "SELECT coalesce(max(seq), 0) FROM notifications") ?? 0
                    }
                    try checkpointer.open(path: path)
                    return SQLiteNotificationStore(path: path, pool: pool, checkpointer: checkpointer, lastSeq: last)
                } catch {
                    try? pool.close()
                    throw error
                }
            } catch let failure as StoreFailure {
                throw failure
            } catch {
                throw StoreFailure("\(path): cannot open the store: \(Self.describe(error))")
            }
        }
    }

    private init(path: String, pool: DatabasePool, checkpointer: SQLiteCheckpointer, lastSeq: Int) {
        self.path = path
        self.pool = pool
        self.checkpointer = checkpointer
        self.lastSeq = Mutex(lastSeq)
    }

    /// SQLite's own words for a database error (GRDB's description adds the statement and its arguments, which may
    /// hold a notification's payload).
    private static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        if let failure = error as? StoreFailure { return failure.message }
        return "\(error)"
    }

    private static func makeDirectory(_ directory: String) throws(StoreFailure) {
        var isDirectory = false
        var probe = stat()
        if stat(directory, &probe) == 0 {
            isDirectory = (probe.st_mode & S_IFMT) == S_IFDIR
            guard isDirectory else { throw StoreFailure("\(directory): not a directory") }
            return
        }
        guard mkdir(directory, 0o700) == 0 else {
            throw StoreFailure("\(directory): cannot create the store's folder: \(String(cString: strerror(errno)))")
        }
    }

    private static func migrate(_ db: Database) throws {
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        let text = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'schema'")
        let version = text.flatMap { Int($0) } ?? 0
        guard version < Self.schemaVersion else {
            guard version == Self.schemaVersion else {
                throw StoreFailure(
                    "the store's schema is version \(version), newer than this salvo's (\(Self.schemaVersion))"
                )
            }
            return
        }
        // Each version's statements in order, from the store's own on: a store of version 1 gains the campaigns.
        var statements: [String] = []
        if version < 1 { statements += Self.version1 }
        if version < 2 { statements += Self.version2 }
        if version < 3 { statements += Self.version3 }
        statements.append(
            "INSERT INTO meta (key, value) VALUES ('schema', '\(Self.schemaVersion)') "
                + "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        for statement in statements { try db.execute(sql: statement) }
    }

    private static let version1 = [
        """
        CREATE TABLE notifications (
            seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, batch TEXT NOT NULL, token BLOB NOT NULL,
            payload BLOB NOT NULL, push_type TEXT, apns_id TEXT, expiration INTEGER, priority INTEGER,
            topic TEXT, collapse_id TEXT, state INTEGER NOT NULL, status INTEGER, reason TEXT,
            apns_unique_id TEXT, unregistered_at INTEGER, accepted_at INTEGER NOT NULL, sent_at INTEGER,
            answered_at INTEGER, uncertain_resends INTEGER NOT NULL DEFAULT 0)
        """,
        "CREATE INDEX notifications_batch ON notifications (batch, seq)",
        // The rows to claim and the rows being sent, each by an index of its own: a partial index is used only
        // for the very condition it names (SQLite does not read `state = 0` as within `state < 2`), and a claim
        // that walked the delivered rows would slow down as the store grows.
        "CREATE INDEX notifications_queued ON notifications (seq) WHERE state = 0",
        "CREATE INDEX notifications_sending ON notifications (seq) WHERE state = 1",
        """
        CREATE TABLE idempotency (
            key_id TEXT NOT NULL, key TEXT NOT NULL, body_hash BLOB NOT NULL, status INTEGER NOT NULL,
            body BLOB NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (key_id, key))
        """,
        "CREATE INDEX idempotency_created ON idempotency (created_at)",
        "CREATE TABLE templates (name TEXT PRIMARY KEY, body BLOB NOT NULL, updated_at INTEGER NOT NULL)",
        """
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, hash BLOB NOT NULL UNIQUE, created_at INTEGER NOT NULL,
            revoked_at INTEGER)
        """,
    ]

    private static let version2 = [
        """
        CREATE TABLE campaigns (
            id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT NULL, settings BLOB NOT NULL,
            created_by TEXT NOT NULL, created_at INTEGER NOT NULL, send_at INTEGER NOT NULL, started_at INTEGER,
            ended_at INTEGER, message TEXT)
        """
    ]

    private static let version3 = [
        "ALTER TABLE notifications ADD COLUMN webhook INTEGER NOT NULL DEFAULT 0",
        // One row per event and endpoint: `state` 0 pending, 1 delivered (acknowledged), 2 dead (given up on).
        """
        CREATE TABLE webhook_outbox (
            seq INTEGER PRIMARY KEY, endpoint TEXT NOT NULL, event_id TEXT NOT NULL, type TEXT NOT NULL,
            created_at INTEGER NOT NULL, data BLOB NOT NULL, state INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0, last_attempt_at INTEGER, ended_at INTEGER,
            UNIQUE (endpoint, event_id))
        """,
        "CREATE INDEX webhook_outbox_pending ON webhook_outbox (endpoint, seq) WHERE state = 0",
        // What each derivation of events (a campaign's rejects file) last read, so that a restart derives only anew.
        "CREATE TABLE webhook_sources (source TEXT PRIMARY KEY, signature TEXT NOT NULL)",
    ]

    // MARK: Cycles

    public func write(_ cycle: StoreCycle) async throws(StoreFailure) -> StoreCycleResult {
        let result = try await self.writing { db in
            let after = self.lastSeq.withLock { $0 }
            let (result, last) = try Self.apply(cycle, after: after, db)
            // Set inside the write, which GRDB commits before any other write starts; a write that throws is rolled
            // back and gave its numbers to no row.
            self.lastSeq.withLock { $0 = last }
            return result
        }
        self.checkpointer.committed()
        return result
    }

    /// Runs `body` in one transaction on the writer's queue, the caller suspended meanwhile; rolled back when it
    /// throws.
    func writing<T: Sendable>(
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(StoreFailure) -> T {
        do {
            return try await self.pool.write(body)
        } catch {
            throw StoreFailure("\(self.path): \(Self.describe(error))")
        }
    }

    /// The statement for `sql`, prepared once for the writer's connection and kept.
    static func statement(_ sql: String, _ db: Database) throws -> SQLiteStatementBinding {
        let statement = try db.cachedStatement(sql: sql)
        return SQLiteStatementBinding(statement: statement.sqliteStatement, connection: db.sqliteConnection!)
    }

    /// The cycle's statements: idempotency keys, the job's outcomes, the queued rows it claims (oldest first), and
    /// the new rows, of which those that fit in the claim's room are stored already handed to the job.
    /// - Returns: the result, and the last sequence number given.
    private static func apply(
        _ cycle: StoreCycle,
        after lastSeq: Int,
        _ db: Database
    ) throws -> (StoreCycleResult, Int) {
        var result = StoreCycleResult()
        // Idempotency keys decided within the cycle too: two requests with one key in the same cycle.
        var seen: [String: (hash: [UInt8], answer: StoredAnswer)] = [:]
        var toInsert: [PendingAccept] = []
        for accept in cycle.accepts {
            guard let key = accept.idempotencyKey else {
                result.accepts.append(.stored)
                toInsert.append(accept)
                continue
            }
            let scoped = accept.keyID + "\u{0}" + key
            var earlier = seen[scoped]
            if earlier == nil {
                let find = try Self.statement(
                    "SELECT body_hash, status, body FROM idempotency WHERE key_id = ? AND key = ?",
                    db
                )
                find.bind(1, accept.keyID)
                find.bind(2, key)
                if try find.next() {
                    earlier = (find.blob(0), StoredAnswer(status: find.int(1) ?? 0, body: find.blob(2)))
                    sqlite3_reset(find.statement)
                }
            }
            if let earlier {
                result.accepts.append(earlier.hash == accept.bodyHash ? .replay(earlier.answer) : .conflict)
                continue
            }
            seen[scoped] = (accept.bodyHash, accept.answer)
            result.accepts.append(.stored)
            toInsert.append(accept)
            let remember = try Self.statement(
                "INSERT INTO idempotency (key_id, key, body_hash, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                db
            )
            remember.bind(1, accept.keyID)
            remember.bind(2, key)
            remember.bind(3, blob: accept.bodyHash)
            remember.bind(4, accept.answer.status)
            remember.bind(5, blob: accept.answer.body)
            remember.bind(6, Int(cycle.now))
            try remember.run()
        }
        result.stored = toInsert.count
        try Self.update(cycle.outcomes, webhooks: cycle.webhooks, db)
        // Rows queued before these (a backlog, or rows given back) go first; the new rows take the room left.
        var room = cycle.claim
        if room > 0 {
            let (claimed, expired) = try Self.claim(room, now: cycle.now, webhooks: cycle.webhooks, db)
            result.claimed = claimed
            result.expired = expired
            room -= claimed.count + expired.count
        }
        let last = try Self.insert(
            toInsert,
            after: lastSeq,
            claiming: room,
            now: cycle.now,
            webhooks: cycle.webhooks,
            into: &result,
            db
        )
        return (result, last)
    }

    /// Stores the accepted notifications with the sequence numbers after `lastSeq`: the first `room` of them as
    /// handed to the job (`result.claimed`, from the request's own values: nothing is read back), any whose
    /// expiration has passed as expired (`result.expired`), the others queued. One prepared statement, run once a
    /// row.
    /// - Returns: the last sequence number given.
    private static func insert(
        _ accepts: [PendingAccept],
        after lastSeq: Int,
        claiming room: Int,
        now: Int64,
        webhooks: WebhookRoutes,
        into result: inout StoreCycleResult,
        _ db: Database
    ) throws -> Int {
        var seq = lastSeq
        var room = room
        let nowSeconds = now / 1000
        let insert = try Self.statement(
            """
            INSERT INTO notifications (seq, id, batch, token, payload, push_type, apns_id, expiration, priority,
                topic, collapse_id, state, accepted_at, sent_at, answered_at, uncertain_resends, webhook)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
            """,
            db
        )
        for accept in accepts {
            for notification in accept.notifications {
                seq += 1
                let headers = notification.headers
                let state: NotificationState
                if let expiration = headers.expiration, expiration > 0, Int64(expiration) < nowSeconds {
                    state = .expired
                    result.expired.append((seq, notification.id))
                    if notification.webhook, webhooks.takes(.outcome) {
                        let events = WebhookEvent.notificationEvents(
                            id: notification.id,
                            batch: accept.batch,
                            token: notification.token.hexString,
                            optedIn: true,
                            update: OutcomeUpdate(seq: seq, state: .expired, at: now)
                        )
                        try Self.enqueue(events, routes: webhooks, db)
                    }
                } else if room > 0 {
                    state = .sending
                    room -= 1
                    result.claimed.append(ClaimedRow(seq: seq, acceptedAt: now, notification: notification))
                } else {
                    state = .queued
                }
                insert.bind(1, seq)
                insert.bind(2, notification.id)
                insert.bind(3, accept.batch)
                insert.bind(4, blob: notification.token.bytes)
                insert.bind(5, blob: notification.payload)
                insert.bind(6, headers.pushType?.rawValue)
                insert.bind(7, headers.id)
                insert.bind(8, headers.expiration.map { Int($0) })
                insert.bind(9, headers.priority.map { Int($0.rawValue) })
                insert.bind(10, headers.topic)
                insert.bind(11, headers.collapseID)
                insert.bind(12, state.rawValue)
                insert.bind(13, Int(now))
                insert.bind(14, state == .sending ? Int(now) : nil)
                insert.bind(15, state == .expired ? Int(now) : nil)
                insert.bind(16, notification.webhook ? 1 : 0)
                try insert.run()
            }
        }
        return seq
    }

    /// Writes the outcomes, one prepared statement run once a row; a row already final keeps its outcome. With
    /// webhooks, a row made final here gets its events in the outbox in the same transaction (once: a row already
    /// final is not changed, so makes none).
    private static func update(_ outcomes: [OutcomeUpdate], webhooks: WebhookRoutes, _ db: Database) throws {
        guard !outcomes.isEmpty else { return }
        guard webhooks.isEmpty else { return try Self.update(outcomes, events: webhooks, db) }
        let update = try Self.statement(
            Self.outcomeUpdate,
            db
        )
        for outcome in outcomes {
            Self.bind(outcome, to: update)
            try update.run()
        }
    }

    /// An outcome's row made final (or queued again): a row already final keeps its outcome.
    private static let outcomeUpdate = """
        UPDATE notifications SET state = ?, status = ?, reason = ?, apns_id = coalesce(?, apns_id),
            apns_unique_id = ?, unregistered_at = ?, answered_at = ?, uncertain_resends = uncertain_resends + ?
        WHERE seq = ? AND state < 2
        """

    private static func bind(_ outcome: OutcomeUpdate, to update: SQLiteStatementBinding) {
        update.bind(1, outcome.state.rawValue)
        update.bind(2, outcome.status)
        update.bind(3, outcome.reason)
        update.bind(4, outcome.apnsID)
        update.bind(5, outcome.apnsUniqueID)
        update.bind(6, outcome.unregisteredAt.map { Int($0) })
        update.bind(7, outcome.state.isFinal ? Int(outcome.at) : nil)
        update.bind(8, outcome.uncertainResend ? 1 : 0)
        update.bind(9, outcome.seq)
    }

    /// `update` when webhooks take events: each changed row's id, batch, token and wish returned, its events put in
    /// the outbox.
    private static func update(_ outcomes: [OutcomeUpdate], events routes: WebhookRoutes, _ db: Database) throws {
        let update = try Self.statement(
            Self.outcomeUpdate + " RETURNING id, batch, token, webhook",
            db
        )
        var events: [WebhookEvent] = []
        for outcome in outcomes {
            Self.bind(outcome, to: update)
            while try update.next() {
                guard outcome.state.isFinal else { continue }
                events += WebhookEvent.notificationEvents(
                    id: update.text(0) ?? "",
                    batch: update.text(1) ?? "",
                    token: Hex.string(update.blob(2)),
                    optedIn: update.int(3) == 1,
                    update: outcome
                )
            }
        }
        try Self.enqueue(events, routes: routes, db)
    }

    /// Puts `events` in the outbox for each endpoint that takes its kind; an event already there (its endpoint and
    /// id) is left as it is.
    /// - Returns: the rows added.
    @discardableResult
    static func enqueue(_ events: [WebhookEvent], routes: WebhookRoutes, _ db: Database) throws -> Int {
        guard !events.isEmpty else { return 0 }
        let insert = try Self.statement(
            """
            INSERT INTO webhook_outbox (endpoint, event_id, type, created_at, data) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (endpoint, event_id) DO NOTHING
            """,
            db
        )
        var added = 0
        for event in events {
            let endpoints = routes.endpoints(for: event.kind)
            guard !endpoints.isEmpty else { continue }
            let data = event.data.compactBytes
            for endpoint in endpoints {
                insert.bind(1, endpoint)
                insert.bind(2, event.id)
                insert.bind(3, event.kind.eventType)
                insert.bind(4, Int(event.createdAt))
                insert.bind(5, blob: data)
                try insert.run()
                added += Int(sqlite3_changes(insert.connection))
            }
        }
        return added
    }

    private static func claim(
        _ count: Int,
        now: Int64,
        webhooks: WebhookRoutes,
        _ db: Database
    ) throws -> ([ClaimedRow], [(seq: Int, id: String)]) {
        let claim = try Self.statement(
            """
            UPDATE notifications SET state = 1, sent_at = ?
            WHERE seq IN (SELECT seq FROM notifications WHERE state = 0 ORDER BY seq LIMIT ?)
            RETURNING seq, id, token, payload, push_type, apns_id, expiration, priority, topic, collapse_id, accepted_at,
                webhook, batch
            """,
            db
        )
        claim.bind(1, Int(now))
        claim.bind(2, count)
        var claimed: [ClaimedRow] = []
        var expired: [(seq: Int, id: String)] = []
        var events: [WebhookEvent] = []
        let nowSeconds = now / 1000
        while try claim.next() {
            let seq = claim.int(0) ?? 0
            let id = claim.text(1) ?? ""
            let expiration = claim.int(6)
            if let expiration, expiration > 0, Int64(expiration) < nowSeconds {
                expired.append((seq, id))
                if claim.int(11) == 1, webhooks.takes(.outcome) {
                    events += WebhookEvent.notificationEvents(
                        id: id,
                        batch: claim.text(12) ?? "",
                        token: Hex.string(claim.blob(2)),
                        optedIn: true,
                        update: OutcomeUpdate(seq: seq, state: .expired, at: now)
                    )
                }
                continue
            }
            guard let token = try? DeviceToken(bytes: claim.blob(2)) else { continue }
            let webhook = claim.int(11) == 1
            let headers = try APNSRequestHeaders(
                pushType: claim.text(4).map { APNSPushType(rawValue: $0) },
                id: claim.text(5),
                expiration: expiration.map { UInt32(clamping: $0) },
                priority: claim.int(7).map { NotificationPriority(rawValue: UInt8(clamping: $0)) },
                topic: claim.text(8),
                collapseID: claim.text(9)
            )
            claimed.append(
                ClaimedRow(
                    seq: seq,
                    acceptedAt: Int64(claim.int(10) ?? 0),
                    notification: ServiceNotification(
                        id: id,
                        token: token,
                        payload: claim.blob(3),
                        headers: headers,
                        webhook: webhook
                    )
                )
            )
        }
        try Self.enqueue(events, routes: webhooks, db)
        // Claimed rows are in the order the statement returned them; the job sends oldest first.
        claimed.sort { $0.seq < $1.seq }
        if !expired.isEmpty {
            let expire = try Self.statement("UPDATE notifications SET state = 4, answered_at = ? WHERE seq = ?", db)
            for row in expired {
                expire.bind(1, Int(now))
                expire.bind(2, row.seq)
                try expire.run()
            }
        }
        return (claimed, expired)
    }

    public func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?,
        webhooks: WebhookRoutes
    ) async throws(StoreFailure) -> StoreRecovery {
        try await self.writing { db in
            var recovery = StoreRecovery()
            let sending = try Int.fetchAll(db, sql: "SELECT seq FROM notifications WHERE state = 1")
            var updates: [OutcomeUpdate] = []
            updates.reserveCapacity(sending.count)
            for seq in sending {
                let mark = marks?(seq) ?? RowMark(state: .written)
                updates.append(recovery.settle(seq: seq, mark: mark, onUncertain: onUncertain, now: now))
            }
            try Self.update(updates, webhooks: webhooks, db)
            recovery.depth = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE state < 2") ?? 0
            return recovery
        }
    }

    // MARK: Reads

    private static let recordColumns = """
        id, batch, token, state, status, reason, apns_id, apns_unique_id, unregistered_at, accepted_at, sent_at,
        answered_at, uncertain_resends
        """

    public func notifications(ids: [String]) async throws(StoreFailure) -> [NotificationRecord] {
        guard !ids.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: ids.count).joined(separator: ",")
        return try await self.read(
            "SELECT \(Self.recordColumns) FROM notifications WHERE id IN (\(marks))",
            StatementArguments(ids),
            Self.record
        )
    }

    public func batch(_ id: String) async throws(StoreFailure) -> [NotificationRecord] {
        try await self.read(
            "SELECT \(Self.recordColumns) FROM notifications WHERE batch = ? ORDER BY seq",
            [id],
            Self.record
        )
    }

    /// The rows of one query on a reading connection (never the writer's: a read waits for no cycle), each made a
    /// value by `make` there (GRDB's rows are not `Sendable`), the caller suspended meanwhile.
    func read<T: Sendable>(
        _ sql: String,
        _ arguments: StatementArguments = [],
        _ make: @escaping @Sendable (Row) -> T?
    ) async throws(StoreFailure) -> [T] {
        do {
            return try await self.pool.read { db in
                try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap(make)
            }
        } catch {
            throw StoreFailure("\(self.path): \(Self.describe(error))")
        }
    }

    private static func record(_ row: Row) -> NotificationRecord {
        var record = NotificationRecord(
            id: row["id"] ?? "",
            batch: row["batch"] ?? "",
            token: Hex.string(Self.bytes(row, "token")),
            state: NotificationState(rawValue: row["state"] ?? 0) ?? .queued,
            acceptedAt: row["accepted_at"] ?? 0
        )
        record.status = row["status"]
        record.reason = row["reason"]
        record.apnsID = row["apns_id"]
        record.apnsUniqueID = row["apns_unique_id"]
        record.unregisteredAt = row["unregistered_at"]
        record.sentAt = row["sent_at"]
        record.answeredAt = row["answered_at"]
        record.uncertainResends = row["uncertain_resends"] ?? 0
        return record
    }

    static func bytes(_ row: Row, _ column: String) -> [UInt8] {
        (row[column] as Data?).map { Array($0) } ?? []
    }

    // MARK: Templates and keys

    public func template(named name: String) async throws(StoreFailure) -> ServiceTemplate? {
        try await self.read("SELECT name, body FROM templates WHERE name = ?", [name], Self.template).first
    }

    public func allTemplates() async throws(StoreFailure) -> [ServiceTemplate] {
        try await self.read("SELECT name, body FROM templates ORDER BY name", [], Self.template)
    }

    private static func template(_ row: Row) -> ServiceTemplate? {
        try? ServiceTemplate(name: row["name"] ?? "", text: Self.bytes(row, "body"))
    }

    public func putTemplate(_ template: ServiceTemplate, now: Int64) async throws(StoreFailure) {
        try await self.change(
            """
            INSERT INTO templates (name, body, updated_at) VALUES (?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
            """,
            [template.name, Data(template.text), now]
        )
    }

    public func deleteTemplate(named name: String) async throws(StoreFailure) -> Bool {
        try await self.change("DELETE FROM templates WHERE name = ?", [name]) > 0
    }

    public func apiKeys() async throws(StoreFailure) -> [APIKeyRecord] {
        try await self.read("SELECT id, name, hash, created_at, revoked_at FROM api_keys ORDER BY created_at", []) {
            APIKeyRecord(
                id: $0["id"] ?? "",
                name: $0["name"] ?? "",
                hash: Self.bytes($0, "hash"),
                createdAt: $0["created_at"] ?? 0,
                revokedAt: $0["revoked_at"]
            )
        }
    }

    public func addAPIKey(_ key: APIKeyRecord) async throws(StoreFailure) {
        try await self.change(
            "INSERT INTO api_keys (id, name, hash, created_at) VALUES (?, ?, ?, ?)",
            [key.id, key.name, Data(key.hash), key.createdAt]
        )
    }

    public func revokeAPIKey(id: String, now: Int64) async throws(StoreFailure) -> Bool {
        try await self.change(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            [now, id]
        ) > 0
    }

    public func forgetIdempotencyKeys(before: Int64) async throws(StoreFailure) {
        try await self.change("DELETE FROM idempotency WHERE created_at < ?", [before])
    }

    public func checkWritable() async throws(StoreFailure) {
        try await self.change(
            "INSERT INTO meta (key, value) VALUES ('checked', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [String(Int64.random(in: 0...Int64.max))]
        )
    }

    /// One statement in a transaction of its own on the writer.
    /// - Returns: the rows it changed.
    @discardableResult
    func change(_ sql: String, _ arguments: StatementArguments) async throws(StoreFailure) -> Int {
        try await self.writing { db in
            try db.execute(sql: sql, arguments: arguments)
            return db.changesCount
        }
    }

    public func close() async {
        await self.checkpointer.close()
        let pool = self.pool
        await BlockingWork.run { try? pool.close() }
    }
}
