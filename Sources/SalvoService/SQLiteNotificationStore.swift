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
    /// The recent claims' times, for the outcomes' `sent_at` (changed after each committed cycle).
    private let claimTimes = Mutex(SQLiteClaimTimes())

    /// The schema this code reads and writes: 1, the notifications, keys and templates; 2 adds the campaigns; 3 the
    /// webhooks' outbox and a notification's wish for its outcome's event; 4 keeps a request's notifications in one
    /// row and their outcomes in rows of their own (`SQLiteLegacyRows` moves a store's rows of before).
    static let schemaVersion = 4

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
                    try pool.write { db in try Self.migrate(db) }
                    try checkpointer.open(path: path)
                    return SQLiteNotificationStore(path: path, pool: pool, checkpointer: checkpointer)
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

    private init(path: String, pool: DatabasePool, checkpointer: SQLiteCheckpointer) {
        self.path = path
        self.pool = pool
        self.checkpointer = checkpointer
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
        if version < 4 { statements += Self.version4 }
        statements.append(
            "INSERT INTO meta (key, value) VALUES ('schema', '\(Self.schemaVersion)') "
                + "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        for statement in statements {
            if statement == Self.moveLegacyRows {
                try SQLiteLegacyRows.move(db)
            } else {
                try db.execute(sql: statement)
            }
        }
    }

    // The statements of each version, as that version ran them: history, never changed (a store of version 3 is
    // what `version1` to `version3` made; the tests make one so).
    static let version1 = [
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

    static let version2 = [
        """
        CREATE TABLE campaigns (
            id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT NOT NULL, settings BLOB NOT NULL,
            created_by TEXT NOT NULL, created_at INTEGER NOT NULL, send_at INTEGER NOT NULL, started_at INTEGER,
            ended_at INTEGER, message TEXT)
        """
    ]

    static let version3 = [
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

    /// Stands among the statements for the move of the rows of before (`SQLiteLegacyRows`), in `version4`.
    private static let moveLegacyRows = "-- move the rows of version 3"

    /// A row a request (its notifications packed, `PackedNotifications`), numbered by its first notification's
    /// sequence number; a row an outcome, appended when the notification is answered or given back; a row a claim
    /// (the cursor: every notification up to `through` was handed to a sending job by then, the newest row the
    /// cursor); the ids of notifications whose ids are not their batch's by index (`NotificationIDs`). Where
    /// version 3 kept a row a notification with four indexes, rewritten as it was sent and answered.
    private static let version4 = [
        """
        CREATE TABLE requests (
            first_seq INTEGER PRIMARY KEY, batch TEXT NOT NULL, count INTEGER NOT NULL, accepted_at INTEGER NOT NULL,
            body BLOB NOT NULL)
        """,
        "CREATE INDEX requests_batch ON requests (batch)",
        """
        CREATE TABLE outcomes (
            seq INTEGER PRIMARY KEY, state INTEGER NOT NULL, status INTEGER, reason TEXT, apns_id TEXT,
            apns_unique_id TEXT, unregistered_at INTEGER, sent_at INTEGER, answered_at INTEGER,
            uncertain_resends INTEGER NOT NULL DEFAULT 0)
        """,
        // The rows given back, to claim first (a partial index, used only for the very condition it names).
        "CREATE INDEX outcomes_queued ON outcomes (seq) WHERE state = 0",
        "CREATE TABLE claims (through INTEGER PRIMARY KEY, at INTEGER NOT NULL)",
        "CREATE TABLE notification_ids (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
        "-- move the rows of version 3",
        "DROP TABLE notifications",
    ]

    // MARK: Cycles

    public func write(_ cycle: StoreCycle) async throws(StoreFailure) -> StoreCycleResult {
        // Each outcome's claim time looked up here, once: the writer gets the times, not the table of claims.
        let sentAt = self.claimTimes.withLock { times in cycle.outcomes.map { times.at($0.seq) } }
        let (result, claim) = try await self.writing { db in try Self.apply(cycle, sentAt: sentAt, db) }
        // Kept once committed: a cycle rolled back handed nothing out.
        if let claim { self.claimTimes.withLock { $0.add(from: claim.from, through: claim.through, at: cycle.now) } }
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

    /// The statement for `sql`, prepared once for the connection and kept.
    static func statement(_ sql: String, _ db: Database) throws -> SQLiteStatementBinding {
        let statement = try db.cachedStatement(sql: sql)
        return SQLiteStatementBinding(statement: statement.sqliteStatement, connection: db.sqliteConnection!)
    }

    /// The first value of the first row of `sql`, an integer (0 when there is none).
    static func integer(_ sql: String, _ db: Database) throws -> Int {
        let statement = try Self.statement(sql, db)
        guard try statement.next() else { return 0 }
        defer { sqlite3_reset(statement.statement) }
        return statement.int(0) ?? 0
    }

    /// The queue's two marks: the last sequence number given to a notification, and the last handed to a sending
    /// job the first time (every row up to it was, every row after it was not; a row given back is queued by its
    /// outcome).
    static func marks(_ db: Database) throws -> (last: Int, cursor: Int) {
        (
            try Self.integer("SELECT first_seq + count - 1 FROM requests ORDER BY first_seq DESC LIMIT 1", db),
            try Self.integer("SELECT through FROM claims ORDER BY through DESC LIMIT 1", db)
        )
    }

    /// The cycle's statements: idempotency keys, the job's outcomes, the rows given back and the queued rows it
    /// claims (oldest first), and the new requests, of whose notifications those that fit in the claim's room are
    /// stored already handed to the job.
    /// - Returns: the result, and the rows this cycle's claim handed out the first time (the cursor's move).
    private static func apply(
        _ cycle: StoreCycle,
        sentAt: [Int64?],
        _ db: Database
    ) throws -> (StoreCycleResult, (from: Int, through: Int)?) {
        var result = StoreCycleResult()
        let toInsert = try Self.remember(cycle, into: &result, db)
        result.stored = toInsert.count
        var requests = SQLiteRequestRows()
        try Self.update(cycle.outcomes, webhooks: cycle.webhooks, sentAt: sentAt, requests: &requests, db)
        let (last, start) = try Self.marks(db)
        var cursor = start
        // Rows given back and rows queued before these (a backlog) go first; the new rows take the room left.
        var claim = SQLiteClaim(room: cycle.claim, now: cycle.now, webhooks: cycle.webhooks)
        try claim.givenBack(&requests, db)
        if cursor < last { cursor = try claim.queued(after: cursor, through: last, db) }
        cursor = try Self.insert(toInsert, after: last, cursor: cursor, claim: &claim, db)
        if cursor != start {
            let mark = try Self.statement("INSERT INTO claims (through, at) VALUES (?, ?)", db)
            mark.bind(1, cursor)
            mark.bind(2, Int(cycle.now))
            try mark.run()
        }
        try claim.finish(db)
        result.claimed = claim.claimed
        result.expired = claim.expired
        return (result, cursor != start ? (start + 1, cursor) : nil)
    }

    /// Checks the cycle's idempotency keys against those stored and each other (two requests with one key in the
    /// same cycle), and stores the new ones with their answers.
    /// - Returns: the accepts to store.
    private static func remember(
        _ cycle: StoreCycle,
        into result: inout StoreCycleResult,
        _ db: Database
    ) throws -> [PendingAccept] {
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
        return toInsert
    }

    /// Stores each accept as one request row, its notifications numbered after `last`: while `claim` has room (the
    /// queue before them all handed out), they are handed to the job from the request's own values (nothing read
    /// back), any whose expiration has passed stored expired, the others queued.
    /// - Returns: the new cursor: the last row handed to the job the first time.
    private static func insert(
        _ accepts: [PendingAccept],
        after last: Int,
        cursor: Int,
        claim: inout SQLiteClaim,
        _ db: Database
    ) throws -> Int {
        var seq = last
        var cursor = cursor
        let insert = try Self.statement(
            "INSERT INTO requests (first_seq, batch, count, accepted_at, body) VALUES (?, ?, ?, ?, ?)",
            db
        )
        for accept in accepts {
            guard !accept.notifications.isEmpty else { continue }
            let first = seq + 1
            // By index, each field read in place (a notification taken whole out of the array is a copy of all its
            // references).
            let notifications = accept.notifications
            var derived = notifications.count < NotificationIDs.capacity
            for index in notifications.indices where derived {
                derived = NotificationIDs.isNotification(notifications[index].id, of: accept.batch, at: index)
            }
            insert.bind(1, first)
            insert.bind(2, accept.batch)
            insert.bind(3, accept.notifications.count)
            insert.bind(4, Int(claim.now))
            insert.bind(
                5,
                blob: PackedNotifications.encode(accept.notifications, batch: accept.batch, explicitIDs: !derived)
            )
            try insert.run()
            if !derived { try Self.rememberIDs(accept.notifications, first: first, db) }
            for index in notifications.indices {
                seq += 1
                let notification = notifications[index]
                // Handed out only where every row before it was: the cursor stays the edge of a prefix.
                if try claim.take(seq: seq, batch: accept.batch, notification, db), cursor == seq - 1 { cursor = seq }
            }
        }
        return cursor
    }

    /// The ids of notifications that are not their batch's by index (made by another means than the service's
    /// requests), by sequence number.
    static func rememberIDs(_ notifications: [ServiceNotification], first: Int, _ db: Database) throws {
        let remember = try Self.statement("INSERT INTO notification_ids (id, seq) VALUES (?, ?)", db)
        for (offset, notification) in notifications.enumerated() {
            remember.bind(1, notification.id)
            remember.bind(2, first + offset)
            try remember.run()
        }
    }

    /// Writes the outcomes, one prepared statement run once a row; a row already final keeps its outcome. With
    /// webhooks, a row made final here gets its events in the outbox in the same transaction (once: a row already
    /// final is not changed, so makes none).
    private static func update(
        _ outcomes: [OutcomeUpdate],
        webhooks: WebhookRoutes,
        sentAt: [Int64?] = [],
        requests: inout SQLiteRequestRows,
        _ db: Database
    ) throws {
        guard !outcomes.isEmpty else { return }
        // When each row was handed out, where the caller knew (else the claims' table says, in the statement).
        func sent(_ index: Int) -> Int64? { index < sentAt.count ? sentAt[index] : nil }
        guard !webhooks.isEmpty else {
            let update = try Self.statement(Self.outcomeUpsert, db)
            for (index, outcome) in outcomes.enumerated() {
                Self.bind(outcome, sentAt: sent(index), to: update)
                try update.run()
            }
            return
        }
        let update = try Self.statement(Self.outcomeUpsert + " RETURNING seq", db)
        var events: [WebhookEvent] = []
        for (index, outcome) in outcomes.enumerated() {
            Self.bind(outcome, sentAt: sent(index), to: update)
            while try update.next() {
                guard outcome.state.isFinal,
                    let (request, notification) = try requests.row(holding: outcome.seq, db)
                else { continue }
                events += WebhookEvent.notificationEvents(
                    id: notification.id,
                    batch: request.batch,
                    token: notification.token.hexString,
                    optedIn: notification.webhook,
                    update: outcome
                )
            }
        }
        try Self.enqueue(events, routes: webhooks, db)
    }

    /// An outcome's row: made final or queued again (given back), a row already final keeping its outcome. A row's
    /// first outcome takes the time it was handed out: the claim's kept in memory (?10), else the claim's row.
    private static let outcomeUpsert = """
        INSERT INTO outcomes (seq, state, status, reason, apns_id, apns_unique_id, unregistered_at, sent_at,
            answered_at, uncertain_resends)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
            coalesce(?10, (SELECT at FROM claims WHERE through >= ?1 ORDER BY through LIMIT 1)), ?8, ?9)
        ON CONFLICT (seq) DO UPDATE SET state = excluded.state, status = excluded.status, reason = excluded.reason,
            apns_id = coalesce(excluded.apns_id, outcomes.apns_id), apns_unique_id = excluded.apns_unique_id,
            unregistered_at = excluded.unregistered_at, answered_at = excluded.answered_at,
            uncertain_resends = outcomes.uncertain_resends + excluded.uncertain_resends
        WHERE outcomes.state < 2
        """

    private static func bind(_ outcome: OutcomeUpdate, sentAt: Int64?, to update: SQLiteStatementBinding) {
        update.bind(1, outcome.seq)
        update.bind(2, outcome.state.rawValue)
        update.bind(3, outcome.status)
        update.bind(4, outcome.reason)
        update.bind(5, outcome.apnsID)
        update.bind(6, outcome.apnsUniqueID)
        update.bind(7, outcome.unregisteredAt.map { Int($0) })
        update.bind(8, outcome.state.isFinal ? Int(outcome.at) : nil)
        update.bind(9, outcome.uncertainResend ? 1 : 0)
        update.bind(10, sentAt.map { Int($0) })
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

    public func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?,
        webhooks: WebhookRoutes
    ) async throws(StoreFailure) -> StoreRecovery {
        try await self.writing { db in
            var recovery = StoreRecovery()
            var updates: [OutcomeUpdate] = []
            for seq in try Self.sending(db) {
                let mark = marks?(seq) ?? RowMark(state: .written)
                updates.append(recovery.settle(seq: seq, mark: mark, onUncertain: onUncertain, now: now))
            }
            var requests = SQLiteRequestRows()
            try Self.update(updates, webhooks: webhooks, requests: &requests, db)
            let all = try Self.integer("SELECT coalesce(sum(count), 0) FROM requests", db)
            recovery.depth = all - (try Self.integer("SELECT count(*) FROM outcomes WHERE state >= 2", db))
            return recovery
        }
    }

    /// The rows handed to a sending job and not answered: up to the cursor, those with no outcome (handed out once)
    /// or one that says so (handed out again). The requests and the outcomes are walked side by side, in order.
    private static func sending(_ db: Database) throws -> [Int] {
        let (_, cursor) = try Self.marks(db)
        let requests = try Self.statement(
            "SELECT first_seq, count FROM requests WHERE first_seq <= ? ORDER BY first_seq",
            db
        )
        let outcomes = try Self.statement("SELECT seq, state FROM outcomes WHERE seq <= ? ORDER BY seq", db)
        requests.bind(1, cursor)
        outcomes.bind(1, cursor)
        var sending: [Int] = []
        var outcome: (seq: Int, state: Int)? = try outcomes.next() ? (outcomes.int(0) ?? 0, outcomes.int(1) ?? 0) : nil
        while try requests.next() {
            let first = requests.int(0) ?? 0
            for seq in first..<min(first + (requests.int(1) ?? 0), cursor + 1) {
                while let current = outcome, current.seq < seq {
                    outcome = try outcomes.next() ? (outcomes.int(0) ?? 0, outcomes.int(1) ?? 0) : nil
                }
                if let current = outcome, current.seq == seq {
                    if current.state == NotificationState.sending.rawValue { sending.append(seq) }
                } else {
                    sending.append(seq)
                }
            }
        }
        if outcome != nil { sqlite3_reset(outcomes.statement) }
        return sending
    }

    // MARK: Reads

    public func notifications(ids: [String]) async throws(StoreFailure) -> [NotificationRecord] {
        guard !ids.isEmpty else { return [] }
        return try await self.reading { db in
            var reader = try SQLiteRecordReader(db)
            var records: [NotificationRecord] = []
            for id in Set(ids) {
                if let record = try reader.record(id: id, db) { records.append(record) }
            }
            return records
        }
    }

    public func batch(_ id: String) async throws(StoreFailure) -> [NotificationRecord] {
        try await self.reading { db in
            var reader = try SQLiteRecordReader(db)
            return try reader.batch(id, db)
        }
    }

    /// `body` in a read transaction on a reading connection (never the writer's: a read waits for no cycle), the
    /// caller suspended meanwhile.
    func reading<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreFailure) -> T {
        do {
            return try await self.pool.read(body)
        } catch {
            throw StoreFailure("\(self.path): \(Self.describe(error))")
        }
    }

    /// The rows of one query on a reading connection, each made a value by `make` there (GRDB's rows are not
    /// `Sendable`), the caller suspended meanwhile.
    func read<T: Sendable>(
        _ sql: String,
        _ arguments: StatementArguments = [],
        _ make: @escaping @Sendable (Row) -> T?
    ) async throws(StoreFailure) -> [T] {
        try await self.reading { db in try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap(make) }
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
