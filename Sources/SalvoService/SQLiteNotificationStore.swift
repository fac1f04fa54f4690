import APNSWire
import Logging
import NIOCore
import NIOPosix
import SQLiteNIO
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
/// Two connections: one writes (one cycle or change at a time, through `gate`), one reads (WAL lets it read the last
/// committed state while a cycle is written). Queries run on the connections' own thread pool, never on the
/// concurrency pool.
public final class SQLiteNotificationStore: NotificationStore {
    public let path: String
    private let writer: SQLiteConnection
    private let reader: SQLiteConnection
    private let gate = AsyncSerialGate()
    private let threadPool: NIOThreadPool
    /// The highest sequence number given to a row. Rows get theirs from here, not from SQLite, so that a cycle
    /// knows the rows it stores without reading them back (only the writer, under `gate`, changes it).
    private let lastSeq: Mutex<Int>

    /// The schema this code reads and writes: 1, the notifications, keys and templates; 2 adds the campaigns.
    static let schemaVersion = 2

    /// Opens (creating it if needed) the store in `directory`.
    public static func open(directory: String) async throws(StoreFailure) -> SQLiteNotificationStore {
        let path = directory + "/salvo.sqlite"
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        // Connections opened before a later step failed are closed before the failure is thrown: a connection
        // dropped open keeps its file handle (and sqlite-nio stops a debug build on it).
        var opened: [SQLiteConnection] = []
        do {
            try await BlockingWork.run { () throws(StoreFailure) in try Self.makeDirectory(directory) }
            let loop = MultiThreadedEventLoopGroup.singleton.any()
            let logger = Logger(label: "salvo.store", factory: { _ in SwiftLogNoOpLogHandler() })
            let writer = try await SQLiteConnection.open(
                storage: .file(path: path),
                threadPool: pool,
                logger: logger,
                on: loop
            )
            opened.append(writer)
            for pragma in ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA busy_timeout=10000"] {
                _ = try await writer.query(pragma)
            }
            try await Self.migrate(writer)
            let reader = try await SQLiteConnection.open(
                storage: .file(path: path),
                threadPool: pool,
                logger: logger,
                on: loop
            )
            opened.append(reader)
            _ = try await reader.query("PRAGMA busy_timeout=10000")
            let last = try await writer.query("SELECT coalesce(max(seq), 0) AS n FROM notifications")
            return SQLiteNotificationStore(
                path: path,
                writer: writer,
                reader: reader,
                threadPool: pool,
                lastSeq: Int(last.first?.column("n")?.integer ?? 0)
            )
        } catch {
            for connection in opened { try? await connection.close() }
            try? await pool.shutdownGracefully()
            if let failure = error as? StoreFailure { throw failure }
            throw StoreFailure("\(path): cannot open the store: \(error)")
        }
    }

    private init(
        path: String,
        writer: SQLiteConnection,
        reader: SQLiteConnection,
        threadPool: NIOThreadPool,
        lastSeq: Int
    ) {
        self.path = path
        self.writer = writer
        self.reader = reader
        self.threadPool = threadPool
        self.lastSeq = Mutex(lastSeq)
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

    private static func migrate(_ db: SQLiteConnection) async throws {
        _ = try await db.query("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        let rows = try await db.query("SELECT value FROM meta WHERE key = 'schema'")
        let version = rows.first?.column("value")?.string.flatMap { Int($0) } ?? 0
        guard version < Self.schemaVersion else {
            guard version == Self.schemaVersion else {
                throw StoreFailure(
                    "the store's schema is version \(version), newer than this salvo's (\(Self.schemaVersion))"
                )
            }
            return
        }
        // Each version's statements in order, from the store's own on: a store of version 1 gains the campaigns.
        var statements = ["BEGIN IMMEDIATE"]
        if version < 1 { statements += Self.version1 }
        if version < 2 { statements += Self.version2 }
        statements += [
            "INSERT INTO meta (key, value) VALUES ('schema', '\(Self.schemaVersion)') "
                + "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            "COMMIT",
        ]
        for statement in statements { _ = try await db.query(statement) }
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

    // MARK: Cycles

    public func write(_ cycle: StoreCycle) async throws(StoreFailure) -> StoreCycleResult {
        try await self.gate.run { () throws(StoreFailure) -> StoreCycleResult in
            let after = self.lastSeq.withLock { $0 }
            let (result, last) = try await self.transaction { db in try await Self.apply(cycle, after: after, db) }
            // Only once committed: a cycle rolled back gave its numbers to no row.
            self.lastSeq.withLock { $0 = last }
            return result
        }
    }

    /// Runs `body` in one transaction on the writer (the caller holds the gate); rolled back when it throws.
    private func transaction<T: Sendable>(
        _ body: (SQLiteConnection) async throws -> T
    ) async throws(StoreFailure) -> T {
        do {
            _ = try await self.writer.query("BEGIN IMMEDIATE")
            do {
                let result = try await body(self.writer)
                _ = try await self.writer.query("COMMIT")
                return result
            } catch {
                _ = try? await self.writer.query("ROLLBACK")
                throw error
            }
        } catch let failure as StoreFailure {
            throw failure
        } catch {
            throw StoreFailure("\(self.path): \(error)")
        }
    }

    /// The cycle's statements: idempotency keys, the job's outcomes, the queued rows it claims (oldest first), and
    /// the new rows, of which those that fit in the claim's room are stored already handed to the job.
    /// - Returns: the result, and the last sequence number given.
    private static func apply(
        _ cycle: StoreCycle,
        after lastSeq: Int,
        _ db: SQLiteConnection
    ) async throws -> (StoreCycleResult, Int) {
        var result = StoreCycleResult()
        // Idempotency keys decided within the cycle too: two requests with one key in the same cycle.
        var seen: [String: (hash: [UInt8], answer: StoredAnswer)] = [:]
        var toInsert: [(PendingAccept)] = []
        for accept in cycle.accepts {
            guard let key = accept.idempotencyKey else {
                result.accepts.append(.stored)
                toInsert.append(accept)
                continue
            }
            let scoped = accept.keyID + "\u{0}" + key
            var earlier = seen[scoped]
            if earlier == nil {
                let rows = try await db.query(
                    "SELECT body_hash, status, body FROM idempotency WHERE key_id = ? AND key = ?",
                    [.text(accept.keyID), .text(key)]
                )
                if let row = rows.first {
                    earlier = (
                        Self.bytes(row.column("body_hash")),
                        StoredAnswer(
                            status: Int(row.column("status")?.integer ?? 0),
                            body: Self.bytes(row.column("body"))
                        )
                    )
                }
            }
            if let earlier {
                result.accepts.append(earlier.hash == accept.bodyHash ? .replay(earlier.answer) : .conflict)
                continue
            }
            seen[scoped] = (accept.bodyHash, accept.answer)
            result.accepts.append(.stored)
            toInsert.append(accept)
            _ = try await db.query(
                "INSERT INTO idempotency (key_id, key, body_hash, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    .text(accept.keyID), .text(key), .blob(ByteBuffer(bytes: accept.bodyHash)),
                    .integer(accept.answer.status), .blob(ByteBuffer(bytes: accept.answer.body)),
                    .integer(Int(cycle.now)),
                ]
            )
        }
        result.stored = toInsert.count
        try await Self.update(cycle.outcomes, db)
        // Rows queued before these (a backlog, or rows given back) go first; the new rows take the room left.
        var room = cycle.claim
        if room > 0 {
            let (claimed, expired) = try await Self.claim(room, now: cycle.now, db)
            result.claimed = claimed
            result.expired = expired
            room -= claimed.count + expired.count
        }
        let last = try await Self.insert(toInsert, after: lastSeq, claiming: room, now: cycle.now, into: &result, db)
        return (result, last)
    }

    /// Rows per INSERT statement (16 values each, within SQLite's 32,766 parameters).
    private static let insertRows = 500

    /// Stores the accepted notifications with the sequence numbers after `lastSeq`: the first `room` of them as
    /// handed to the job (`result.claimed`, from the request's own values: nothing is read back), any whose
    /// expiration has passed as expired (`result.expired`), the others queued.
    /// - Returns: the last sequence number given.
    private static func insert(
        _ accepts: [PendingAccept],
        after lastSeq: Int,
        claiming room: Int,
        now: Int64,
        into result: inout StoreCycleResult,
        _ db: SQLiteConnection
    ) async throws -> Int {
        var rows: [(batch: String, notification: ServiceNotification)] = []
        for accept in accepts { for notification in accept.notifications { rows.append((accept.batch, notification)) } }
        var seq = lastSeq
        var room = room
        let nowSeconds = now / 1000
        var start = 0
        while start < rows.count {
            let slice = rows[start..<min(rows.count, start + Self.insertRows)]
            start += slice.count
            var binds: [SQLiteData] = []
            binds.reserveCapacity(slice.count * 16)
            for (batch, notification) in slice {
                seq += 1
                let headers = notification.headers
                let state: NotificationState
                if let expiration = headers.expiration, expiration > 0, Int64(expiration) < nowSeconds {
                    state = .expired
                    result.expired.append((seq, notification.id))
                } else if room > 0 {
                    state = .sending
                    room -= 1
                    result.claimed.append(ClaimedRow(seq: seq, acceptedAt: now, notification: notification))
                } else {
                    state = .queued
                }
                binds.append(.integer(seq))
                binds.append(.text(notification.id))
                binds.append(.text(batch))
                binds.append(.blob(ByteBuffer(bytes: notification.token.bytes)))
                binds.append(.blob(ByteBuffer(bytes: notification.payload)))
                binds.append(headers.pushType.map { .text($0.rawValue) } ?? .null)
                binds.append(headers.id.map { .text($0) } ?? .null)
                binds.append(headers.expiration.map { .integer(Int($0)) } ?? .null)
                binds.append(headers.priority.map { .integer(Int($0.rawValue)) } ?? .null)
                binds.append(headers.topic.map { .text($0) } ?? .null)
                binds.append(headers.collapseID.map { .text($0) } ?? .null)
                binds.append(.integer(state.rawValue))
                binds.append(.integer(Int(now)))
                binds.append(state == .sending ? .integer(Int(now)) : .null)
                binds.append(state == .expired ? .integer(Int(now)) : .null)
                binds.append(.integer(0))
            }
            let values = Array(repeating: "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", count: slice.count)
                .joined(separator: ",")
            _ = try await db.query(
                """
                INSERT INTO notifications (seq, id, batch, token, payload, push_type, apns_id, expiration, priority,
                    topic, collapse_id, state, accepted_at, sent_at, answered_at, uncertain_resends) VALUES \(values)
                """,
                binds
            )
        }
        return seq
    }

    /// Rows per UPDATE statement (9 values each).
    private static let updateRows = 1000

    private static func update(_ outcomes: [OutcomeUpdate], _ db: SQLiteConnection) async throws {
        var start = 0
        while start < outcomes.count {
            let slice = outcomes[start..<min(outcomes.count, start + Self.updateRows)]
            start += slice.count
            var binds: [SQLiteData] = []
            binds.reserveCapacity(slice.count * 9)
            for outcome in slice {
                binds.append(.integer(outcome.seq))
                binds.append(.integer(outcome.state.rawValue))
                binds.append(outcome.status.map { .integer($0) } ?? .null)
                binds.append(outcome.reason.map { .text($0) } ?? .null)
                binds.append(outcome.apnsID.map { .text($0) } ?? .null)
                binds.append(outcome.apnsUniqueID.map { .text($0) } ?? .null)
                binds.append(outcome.unregisteredAt.map { .integer(Int($0)) } ?? .null)
                binds.append(outcome.state.isFinal ? .integer(Int(outcome.at)) : .null)
                binds.append(.integer(outcome.uncertainResend ? 1 : 0))
            }
            let values = Array(repeating: "(?,?,?,?,?,?,?,?,?)", count: slice.count).joined(separator: ",")
            _ = try await db.query(
                """
                WITH v (seq, state, status, reason, apns_id, apns_unique_id, unregistered_at, answered_at, resend)
                    AS (VALUES \(values))
                UPDATE notifications SET state = v.state, status = v.status, reason = v.reason,
                    apns_id = coalesce(v.apns_id, notifications.apns_id), apns_unique_id = v.apns_unique_id, unregistered_at = v.unregistered_at,
                    answered_at = v.answered_at, uncertain_resends = notifications.uncertain_resends + v.resend
                FROM v WHERE notifications.seq = v.seq AND notifications.state < 2
                """,
                binds
            )
        }
    }

    private static func claim(
        _ count: Int,
        now: Int64,
        _ db: SQLiteConnection
    ) async throws -> ([ClaimedRow], [(seq: Int, id: String)]) {
        let rows = try await db.query(
            """
            UPDATE notifications SET state = 1, sent_at = ?
            WHERE seq IN (SELECT seq FROM notifications WHERE state = 0 ORDER BY seq LIMIT ?)
            RETURNING seq, id, token, payload, push_type, apns_id, expiration, priority, topic, collapse_id, accepted_at
            """,
            [.integer(Int(now)), .integer(count)]
        )
        var claimed: [ClaimedRow] = []
        var expired: [(seq: Int, id: String)] = []
        claimed.reserveCapacity(rows.count)
        let nowSeconds = now / 1000
        for row in rows {
            let seq = Int(row.column("seq")?.integer ?? 0)
            let id = row.column("id")?.string ?? ""
            let expiration = row.column("expiration")?.integer
            if let expiration, expiration > 0, Int64(expiration) < nowSeconds {
                expired.append((seq, id))
                continue
            }
            guard let token = try? DeviceToken(bytes: Self.bytes(row.column("token"))) else { continue }
            let headers = try APNSRequestHeaders(
                pushType: row.column("push_type")?.string.map { APNSPushType(rawValue: $0) },
                id: row.column("apns_id")?.string,
                expiration: expiration.map { UInt32(clamping: $0) },
                priority: row.column("priority")?.integer.map { NotificationPriority(rawValue: UInt8(clamping: $0)) },
                topic: row.column("topic")?.string,
                collapseID: row.column("collapse_id")?.string
            )
            claimed.append(
                ClaimedRow(
                    seq: seq,
                    acceptedAt: Int64(row.column("accepted_at")?.integer ?? 0),
                    notification: ServiceNotification(
                        id: id,
                        token: token,
                        payload: Self.bytes(row.column("payload")),
                        headers: headers
                    )
                )
            )
        }
        // Claimed rows are in the order the statement returned them; the job sends oldest first.
        claimed.sort { $0.seq < $1.seq }
        if !expired.isEmpty {
            let marks = Array(repeating: "?", count: expired.count).joined(separator: ",")
            _ = try await db.query(
                "UPDATE notifications SET state = 4, answered_at = ? WHERE seq IN (\(marks))",
                [.integer(Int(now))] + expired.map { .integer($0.seq) }
            )
        }
        return (claimed, expired)
    }

    public func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?
    ) async throws(StoreFailure) -> StoreRecovery {
        try await self.gate.run { () throws(StoreFailure) -> StoreRecovery in
            try await self.transaction { db in
                var recovery = StoreRecovery()
                let sending = try await db.query("SELECT seq FROM notifications WHERE state = 1")
                var updates: [OutcomeUpdate] = []
                updates.reserveCapacity(sending.count)
                for row in sending {
                    let seq = Int(row.column("seq")?.integer ?? 0)
                    let mark = marks?(seq) ?? RowMark(state: .written)
                    var update = OutcomeUpdate(seq: seq, state: .queued, at: now)
                    switch mark.state {
                    case .none:
                        recovery.neverWritten += 1
                    case .confirmed:
                        recovery.answered += 1
                        update.state = .delivered
                        update.status = 200
                    case .rejected:
                        recovery.answered += 1
                        update.state = .refused
                        update.status = mark.status
                        update.reason = mark.reason ?? "Refused"
                    case .written, .presumed, .expired:
                        recovery.uncertain += 1
                        if onUncertain == .resend {
                            update.uncertainResend = true
                        } else {
                            update.state = .uncertain
                            update.reason = "UncertainAfterRestart"
                        }
                    }
                    updates.append(update)
                }
                try await Self.update(updates, db)
                let open = try await db.query("SELECT count(*) AS n FROM notifications WHERE state < 2")
                recovery.depth = Int(open.first?.column("n")?.integer ?? 0)
                return recovery
            }
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
            ids.map { .text($0) }
        ).map(Self.record)
    }

    public func batch(_ id: String) async throws(StoreFailure) -> [NotificationRecord] {
        try await self.read(
            "SELECT \(Self.recordColumns) FROM notifications WHERE batch = ? ORDER BY seq",
            [.text(id)]
        ).map(Self.record)
    }

    func read(_ query: String, _ binds: [SQLiteData] = []) async throws(StoreFailure) -> [SQLiteRow] {
        do {
            return try await self.reader.query(query, binds)
        } catch {
            throw StoreFailure("\(self.path): \(error)")
        }
    }

    private static func record(_ row: SQLiteRow) -> NotificationRecord {
        var record = NotificationRecord(
            id: row.column("id")?.string ?? "",
            batch: row.column("batch")?.string ?? "",
            token: Hex.string(Self.bytes(row.column("token"))),
            state: NotificationState(rawValue: Int(row.column("state")?.integer ?? 0)) ?? .queued,
            acceptedAt: Int64(row.column("accepted_at")?.integer ?? 0)
        )
        record.status = row.column("status")?.integer.map { Int($0) }
        record.reason = row.column("reason")?.string
        record.apnsID = row.column("apns_id")?.string
        record.apnsUniqueID = row.column("apns_unique_id")?.string
        record.unregisteredAt = row.column("unregistered_at")?.integer.map { Int64($0) }
        record.sentAt = row.column("sent_at")?.integer.map { Int64($0) }
        record.answeredAt = row.column("answered_at")?.integer.map { Int64($0) }
        record.uncertainResends = Int(row.column("uncertain_resends")?.integer ?? 0)
        return record
    }

    static func bytes(_ data: SQLiteData?) -> [UInt8] {
        switch data {
        case .blob(let buffer)?: Array(buffer.readableBytesView)
        case .text(let text)?: Array(text.utf8)
        default: []
        }
    }

    // MARK: Templates and keys

    public func template(named name: String) async throws(StoreFailure) -> ServiceTemplate? {
        let rows = try await self.read("SELECT name, body FROM templates WHERE name = ?", [.text(name)])
        return rows.first.flatMap(Self.template)
    }

    public func allTemplates() async throws(StoreFailure) -> [ServiceTemplate] {
        try await self.read("SELECT name, body FROM templates ORDER BY name").compactMap(Self.template)
    }

    private static func template(_ row: SQLiteRow) -> ServiceTemplate? {
        try? ServiceTemplate(name: row.column("name")?.string ?? "", text: Self.bytes(row.column("body")))
    }

    public func putTemplate(_ template: ServiceTemplate, now: Int64) async throws(StoreFailure) {
        try await self.change(
            """
            INSERT INTO templates (name, body, updated_at) VALUES (?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
            """,
            [.text(template.name), .blob(ByteBuffer(bytes: template.text)), .integer(Int(now))]
        )
    }

    public func deleteTemplate(named name: String) async throws(StoreFailure) -> Bool {
        try await self.change("DELETE FROM templates WHERE name = ? RETURNING name", [.text(name)]) > 0
    }

    public func apiKeys() async throws(StoreFailure) -> [APIKeyRecord] {
        try await self.read("SELECT id, name, hash, created_at, revoked_at FROM api_keys ORDER BY created_at").map {
            APIKeyRecord(
                id: $0.column("id")?.string ?? "",
                name: $0.column("name")?.string ?? "",
                hash: Self.bytes($0.column("hash")),
                createdAt: Int64($0.column("created_at")?.integer ?? 0),
                revokedAt: $0.column("revoked_at")?.integer.map { Int64($0) }
            )
        }
    }

    public func addAPIKey(_ key: APIKeyRecord) async throws(StoreFailure) {
        try await self.change(
            "INSERT INTO api_keys (id, name, hash, created_at) VALUES (?, ?, ?, ?)",
            [.text(key.id), .text(key.name), .blob(ByteBuffer(bytes: key.hash)), .integer(Int(key.createdAt))]
        )
    }

    public func revokeAPIKey(id: String, now: Int64) async throws(StoreFailure) -> Bool {
        try await self.change(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
            [.integer(Int(now)), .text(id)]
        ) > 0
    }

    public func forgetIdempotencyKeys(before: Int64) async throws(StoreFailure) {
        try await self.change("DELETE FROM idempotency WHERE created_at < ?", [.integer(Int(before))])
    }

    public func checkWritable() async throws(StoreFailure) {
        try await self.change(
            "INSERT INTO meta (key, value) VALUES ('checked', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [.text(String(Int64.random(in: 0...Int64.max)))]
        )
    }

    /// One statement in a transaction of its own on the writer; the rows it returned.
    @discardableResult
    func change(_ query: String, _ binds: [SQLiteData]) async throws(StoreFailure) -> Int {
        try await self.gate.run { () throws(StoreFailure) -> Int in
            try await self.transaction { db in try await db.query(query, binds).count }
        }
    }

    public func close() async {
        try? await self.reader.close()
        try? await self.writer.close()
        try? await self.threadPool.shutdownGracefully()
    }
}
