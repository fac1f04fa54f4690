import APNSWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import SalvoPostgres
import SalvoRows
import SalvoService
import Synchronization

/// The store of a fleet: the service's tables in a PostgreSQL database (schema `salvo`, made by `salvo serve
/// migrate`), shared by any number of `salvo serve` processes, each a worker with an id of its own.
///
/// A cycle is one transaction (`BEGIN … COMMIT`, `synchronous_commit` on), as in the SQLite store: the requests'
/// notifications numbered by the table's sequence, the job's outcomes, and the rows handed to this worker. Every part
/// of a cycle is one statement for all its rows, the rows bound as arrays and read by `unnest` (`INSERT … SELECT …
/// FROM unnest($1::bigint[], …)`, `UPDATE … FROM unnest(…)`): a round trip per row would hold the cycle, and every
/// request waiting on it, for a network round trip per notification (a thousand rows a cycle at half a millisecond
/// each is half a second).
///
/// Claims take the oldest rows with `FOR UPDATE SKIP LOCKED`, so two workers claiming at once take disjoint rows,
/// and stamp each with this worker's id, a lease (`lease_until`) and a fencing token (`fence`, one more at every
/// claim of the row). A row whose lease expired is taken by the next claim of any worker, sent again (or ended
/// uncertain, as `StoreCycle.onUncertain` says). An outcome is applied only to a row this worker still holds under
/// the same fence (`WHERE seq = … AND state < 2 AND worker = $me AND fence = …`): a worker whose row was taken over
/// has its outcome refused, counted in `StoreCycleResult.fenced`.
///
/// Every call is bounded (`Options.timeout`): a server that does not answer fails the call with a `StoreFailure`,
/// and the server gives up on a statement soon after (`statement_timeout`).
public final class PostgresNotificationStore: NotificationStore {
    public struct Options: Sendable {
        /// This worker's id, stamped on the rows it claims (`--worker-id`).
        public var workerID: String
        /// How long a claimed row is this worker's before another may take it over.
        public var lease: Duration = .seconds(120)
        /// The longest a call may take, from the wait for a connection to the commit.
        public var timeout: Duration = .seconds(30)
        /// Connections of the pool at most.
        public var connections = 8

        public init(workerID: String) { self.workerID = workerID }
    }

    public let location: PostgresLocation
    public let options: Options
    let client: PostgresClient
    private let running: Task<Void, Never>
    /// The loop that keeps the calls' deadlines: they fire whatever the concurrency pool is doing.
    private let loop: any EventLoop
    /// The rows this worker holds, by sequence number, with the fence of its claim: an outcome names its row's fence
    /// in its cycle. Changed only after a commit.
    private let held = Mutex<[Int: Int64]>([:])
    /// The task that listens for other workers' queued rows (`watchQueue`), cancelled when the store closes.
    private let listener = Mutex<Task<Void, Never>?>(nil)

    static let logger = Logger(label: "salvo.store.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Opens the store at `location`: a check, over one connection, that the server takes the login and the
    /// database holds the schema this code knows (a pool retries a refused login until its caller gives up, so the
    /// check does not use it), then the pool of connections.
    ///
    /// - Throws: `StoreFailure` naming the store by its URL without password: no server, a refused login, no schema
    ///   or another version of it.
    public static func open(
        location: PostgresLocation,
        options: Options
    ) async throws(StoreFailure) -> PostgresNotificationStore {
        try await Self.withConnection(location, timeout: options.timeout) { connection in
            try await PostgresStoreSchema.check(connection, logger: Self.logger)
        }
        var configuration: PostgresClient.Configuration
        do {
            configuration = try location.clientConfiguration()
        } catch {
            throw StoreFailure(error.message)
        }
        configuration.options.additionalStartupParameters += Self.sessionSettings(timeout: options.timeout)
        configuration.options.maximumConnections = options.connections
        let client = PostgresClient(configuration: configuration, backgroundLogger: Self.logger)
        return PostgresNotificationStore(location: location, options: options, client: client)
    }

    /// Brings the database's schema to this code's version (`salvo serve migrate`) over one connection:
    /// idempotent, safe when several workers run it at once (an advisory lock).
    public static func migrate(
        location: PostgresLocation,
        timeout: Duration = .seconds(120)
    ) async throws(StoreFailure) -> PostgresStoreSchema.Migration {
        try await Self.withConnection(location, timeout: timeout) { connection in
            try await PostgresStoreSchema.migrate(connection, logger: Self.logger)
        }
    }

    /// The settings of every session: a cycle's commit waits for the server's log flush, whatever the database's
    /// default, and the server gives up on a statement, or a transaction left idle, when the caller has.
    private static func sessionSettings(timeout: Duration) -> [(String, String)] {
        let milliseconds = "\(Self.milliseconds(timeout))"
        return [
            ("synchronous_commit", "on"), ("statement_timeout", milliseconds),
            ("idle_in_transaction_session_timeout", milliseconds),
        ]
    }

    /// Runs `body` on a connection of its own, closed after it; the connection is closed at `timeout` too, which
    /// fails the statement in flight (the deadline is kept on the connection's event loop).
    private static func withConnection<T: Sendable>(
        _ location: PostgresLocation,
        timeout: Duration,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(StoreFailure) -> T {
        var configuration: PostgresConnection.Configuration
        do {
            configuration = try location.configuration()
        } catch {
            throw StoreFailure(error.message)
        }
        configuration.options.additionalStartupParameters += Self.sessionSettings(timeout: timeout)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.logger)
        } catch {
            throw StoreFailure(PostgresFailure.connecting(error, to: location).message)
        }
        let expired = NIOLockedValueBox(false)
        let watchdog = connection.eventLoop.scheduleTask(in: .nanoseconds(Self.milliseconds(timeout) * 1_000_000)) {
            expired.withLockedValue { $0 = true }
            connection.close().whenComplete { _ in }
        }
        do {
            let value = try await body(connection)
            watchdog.cancel()
            try? await connection.close()
            return value
        } catch {
            watchdog.cancel()
            try? await connection.close()
            throw Self.failure(expired.withLockedValue { $0 } ? TimedOut() : error, at: location, timeout: timeout)
        }
    }

    private init(location: PostgresLocation, options: Options, client: PostgresClient) {
        self.location = location
        self.options = options
        self.client = client
        self.loop = PostgresClient.defaultEventLoopGroup.any()
        self.running = Task { await client.run() }
    }

    public var workerID: String { self.options.workerID }

    // MARK: Calls, bounded

    /// A timeout's error, told apart from the server's.
    private struct TimedOut: Error {}

    /// Runs `body` with the pool, the caller resumed with its result or, at `options.timeout`, with a failure (the
    /// work is cancelled then: a wait for a connection ends; a statement ends by the server's own limit).
    func bounded<T: Sendable>(
        _ body: @escaping @Sendable (PostgresClient) async throws -> T
    ) async throws(StoreFailure) -> T {
        let client = self.client
        let nanoseconds = Self.milliseconds(self.options.timeout) * 1_000_000
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            let once = NIOLockedValueBox<CheckedContinuation<Result<T, any Error>, Never>?>(continuation)
            let work = Task {
                let outcome: Result<T, any Error>
                do {
                    outcome = .success(try await body(client))
                } catch {
                    outcome = .failure(error)
                }
                once.withLockedValue { taken in
                    defer { taken = nil }
                    return taken
                }?.resume(returning: outcome)
            }
            self.loop.scheduleTask(in: .nanoseconds(nanoseconds)) {
                work.cancel()
                once.withLockedValue { taken in
                    defer { taken = nil }
                    return taken
                }?.resume(returning: .failure(TimedOut()))
            }
        }
        switch result {
        case .success(let value): return value
        case .failure(let error): throw self.failure(error)
        }
    }

    /// Runs `body` in one transaction on one connection of the pool: committed when it returns, rolled back when it
    /// throws.
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws(StoreFailure) -> T {
        try await self.bounded { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: Self.logger)
                let value: T
                do {
                    value = try await body(connection)
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: Self.logger)
                    throw error
                }
                try await connection.query("COMMIT", logger: Self.logger)
                return value
            }
        }
    }

    /// The rows of one statement, each made a value by `make`.
    func read<T: Sendable>(
        _ query: PostgresQuery,
        _ make: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws(StoreFailure) -> [T] {
        try await self.bounded { client in
            var values: [T] = []
            for try await row in try await client.query(query, logger: Self.logger) { values.append(try make(row)) }
            return values
        }
    }

    /// One statement in a transaction of its own (the pool's connections commit each statement).
    /// - Returns: the rows it changed.
    @discardableResult
    func change(_ query: PostgresQuery) async throws(StoreFailure) -> Int {
        try await self.bounded { client in
            try await client.withConnection { connection in
                try await connection.query(query, logger: Self.logger).get().metadata.rows ?? 0
            }
        }
    }

    /// The store's failure, named by the URL without its password: the server's own words (SQLSTATE and message,
    /// never the statement or its values, which hold notifications), a refused login, or no answer.
    private func failure(_ error: any Error) -> StoreFailure {
        Self.failure(error, at: self.location, timeout: self.options.timeout)
    }

    private static func failure(_ error: any Error, at location: PostgresLocation, timeout: Duration) -> StoreFailure {
        let place = location.redacted
        if let failure = error as? StoreFailure { return StoreFailure("\(place): \(failure.message)") }
        if error is TimedOut {
            return StoreFailure(
                "\(place): no answer within \(timeout.components.seconds) s"
            )
        }
        if let error = error as? PSQLError {
            if let info = error.serverInfo {
                let state = info[.sqlState] ?? "?????"
                // A login refused, a database that does not exist: the words a connection's failure has.
                if state.hasPrefix("28") || state == "3D000" {
                    return StoreFailure(PostgresFailure.connecting(error, to: location).message)
                }
                var text = "\(place): \(info[.severity] ?? "ERROR") \(state): \(info[.message] ?? "(no message)")"
                if let hint = info[.hint] { text += "; hint: \(hint)" }
                return StoreFailure(text)
            }
            return StoreFailure(PostgresFailure.connecting(error, to: location).message)
        }
        if error is CancellationError { return StoreFailure("\(place): cancelled") }
        return StoreFailure(PostgresFailure.connecting(error, to: location).message)
    }

    public func close() async {
        self.listener.withLock { $0?.cancel() }
        self.running.cancel()
    }

    // MARK: Cycles

    public func write(_ cycle: StoreCycle) async throws(StoreFailure) -> StoreCycleResult {
        let fences = self.held.withLock { $0 }
        let worker = self.options.workerID
        let lease = Self.milliseconds(self.options.lease)
        let applied = try await self.transaction { connection in
            var statements = PostgresCycle(cycle: cycle, worker: worker, leaseMilliseconds: lease, fences: fences)
            return try await statements.apply(connection)
        }
        // Committed: the rows claimed are this worker's under their fences; the rows answered or taken over are not.
        self.held.withLock { held in
            for seq in applied.released { held[seq] = nil }
            for (seq, fence) in applied.claims { held[seq] = fence }
        }
        return applied.result
    }

    public var lease: Duration? { self.options.lease }

    /// A third of the lease: two renewals may fail (a database restarting) before a row's lease runs out.
    public var leaseRenewal: Duration? { self.options.lease / 3 }

    public func renewLeases(_ seqs: Set<Int>, now: Int64) async throws(StoreFailure) -> LeaseRenewal {
        let until = now + Self.milliseconds(self.options.lease)
        let worker = self.options.workerID
        let named = seqs.map(Int64.init)
        let held = try await self.read(
            """
            UPDATE salvo.notifications SET lease_until = \(until)
            WHERE seq = ANY(\(named)::bigint[]) AND worker = \(worker) AND state = 1 RETURNING seq
            """
        ) { try $0.decode(Int.self) }
        return LeaseRenewal(held: Set(held), until: until)
    }

    // MARK: Queue signals

    /// The channel a cycle that leaves rows queued notifies (`pg_notify`, sent at its commit), with the worker's id
    /// as the payload: each worker listens on it and ignores its own.
    static let queueChannel = "salvo_queue"

    public func watchQueue(_ wake: @escaping @Sendable () -> Void) {
        let location = self.location
        let worker = self.options.workerID
        let timeout = self.options.timeout
        let task = Task { await Self.listen(location, worker: worker, timeout: timeout, wake: wake) }
        self.listener.withLock { listener in
            listener?.cancel()
            listener = task
        }
    }

    /// Listens on `queueChannel` over a connection of its own until cancelled, connecting again after a bounded,
    /// growing pause (0.25 s doubled to 5 s) when the connection is lost: a database restart costs a wake-up, never
    /// the listener. `wake` is called once each time it starts to listen (rows may have been queued meanwhile), and
    /// for every other worker's notification.
    private static func listen(
        _ location: PostgresLocation,
        worker: String,
        timeout: Duration,
        wake: @escaping @Sendable () -> Void
    ) async {
        var pause = Duration.milliseconds(250)
        while !Task.isCancelled {
            do {
                var configuration = try location.configuration()
                configuration.options.additionalStartupParameters += Self.sessionSettings(timeout: timeout)
                let connection = try await PostgresConnection.connect(
                    configuration: configuration,
                    id: 2,
                    logger: Self.logger
                )
                pause = .milliseconds(250)
                do {
                    try await connection.listen(on: Self.queueChannel) { notifications in
                        wake()
                        for try await notification in notifications where notification.payload != worker { wake() }
                    }
                } catch {}
                try? await connection.close()
            } catch {}
            guard !Task.isCancelled else { return }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .seconds(5))
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    public func recover(
        onUncertain: OnUncertain,
        now: Int64,
        marks: (@Sendable (Int) -> RowMark)?,
        webhooks: WebhookRoutes
    ) async throws(StoreFailure) -> StoreRecovery {
        let worker = self.options.workerID
        return try await self.transaction { connection in
            var recovery = StoreRecovery()
            // This worker's rows (a restart with the same --worker-id: the marks tell what became of them), and
            // any worker's whose lease expired (the marks know nothing of them: each may have been written).
            var rows: [(seq: Int, mine: Bool)] = []
            let found = try await connection.query(
                """
                SELECT seq, coalesce(worker = \(worker), false) FROM salvo.notifications
                WHERE state = 1 AND (worker = \(worker) OR lease_until < \(now))
                ORDER BY seq FOR UPDATE SKIP LOCKED
                """,
                logger: Self.logger
            )
            for try await row in found {
                let (seq, mine) = try row.decode((Int, Bool).self)
                rows.append((seq, mine))
            }
            var updates: [OutcomeUpdate] = []
            updates.reserveCapacity(rows.count)
            for row in rows {
                let mark = row.mine ? marks?(row.seq) ?? RowMark(state: .written) : RowMark(state: .written)
                updates.append(recovery.settle(seq: row.seq, mark: mark, onUncertain: onUncertain, now: now))
            }
            var cycle = StoreCycle(now: now)
            cycle.outcomes = updates
            cycle.webhooks = webhooks
            var statements = PostgresCycle(cycle: cycle, worker: worker, leaseMilliseconds: 0, fences: [:])
            statements.recovering = true
            _ = try await statements.apply(connection)
            let depth = try await connection.query(
                "SELECT count(*) FROM salvo.notifications WHERE state < 2",
                logger: Self.logger
            )
            for try await row in depth { recovery.depth = try row.decode(Int.self) }
            return recovery
        }
    }

    // MARK: Reads

    static let recordColumns = """
        id, batch, token, state, status, reason, apns_id, apns_unique_id, unregistered_at, accepted_at, sent_at,
        answered_at, uncertain_resends
        """

    public func notifications(ids: [String]) async throws(StoreFailure) -> [NotificationRecord] {
        guard !ids.isEmpty else { return [] }
        var binds = PostgresBindings()
        binds.append(ids)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: "SELECT \(Self.recordColumns) FROM salvo.notifications WHERE id = ANY($1::text[])",
                binds: binds
            ),
            Self.record
        )
    }

    public func batch(_ id: String) async throws(StoreFailure) -> [NotificationRecord] {
        var binds = PostgresBindings()
        binds.append(id)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: "SELECT \(Self.recordColumns) FROM salvo.notifications WHERE batch = $1 ORDER BY seq",
                binds: binds
            ),
            Self.record
        )
    }

    private static func record(_ row: PostgresRow) throws -> NotificationRecord {
        let (id, batch, token, state, status, reason, apnsID, uniqueID, unregisteredAt, acceptedAt, sentAt) =
            try row.decode(
                (
                    String, String, ByteBuffer, Int, Int?, String?, String?, String?, Int64?, Int64, Int64?
                ).self
            )
        let (answeredAt, resends) = try row.makeRandomAccess().decodeTail()
        var record = NotificationRecord(
            id: id,
            batch: batch,
            token: Hex.string(Array(token.readableBytesView)),
            state: NotificationState(rawValue: state) ?? .queued,
            acceptedAt: acceptedAt
        )
        record.status = status
        record.reason = reason
        record.apnsID = apnsID
        record.apnsUniqueID = uniqueID
        record.unregisteredAt = unregisteredAt
        record.sentAt = sentAt
        record.answeredAt = answeredAt
        record.uncertainResends = resends
        return record
    }

    // MARK: Templates and keys

    public func template(named name: String) async throws(StoreFailure) -> ServiceTemplate? {
        try await self.read("SELECT name, body FROM salvo.templates WHERE name = \(name)", Self.template).first ?? nil
    }

    public func allTemplates() async throws(StoreFailure) -> [ServiceTemplate] {
        try await self.read("SELECT name, body FROM salvo.templates ORDER BY name", Self.template).compactMap { $0 }
    }

    private static func template(_ row: PostgresRow) throws -> ServiceTemplate? {
        let (name, body) = try row.decode((String, ByteBuffer).self)
        return try? ServiceTemplate(name: name, text: Array(body.readableBytesView))
    }

    public func putTemplate(_ template: ServiceTemplate, now: Int64) async throws(StoreFailure) {
        let body = ByteBuffer(bytes: template.text)
        try await self.change(
            """
            INSERT INTO salvo.templates (name, body, updated_at) VALUES (\(template.name), \(body), \(now))
            ON CONFLICT (name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
            """
        )
    }

    public func deleteTemplate(named name: String) async throws(StoreFailure) -> Bool {
        try await self.change("DELETE FROM salvo.templates WHERE name = \(name)") > 0
    }

    public func apiKeys() async throws(StoreFailure) -> [APIKeyRecord] {
        try await self.read("SELECT id, name, hash, created_at, revoked_at FROM salvo.api_keys ORDER BY created_at") {
            let (id, name, hash, createdAt, revokedAt) = try $0.decode((String, String, ByteBuffer, Int64, Int64?).self)
            return APIKeyRecord(
                id: id,
                name: name,
                hash: Array(hash.readableBytesView),
                createdAt: createdAt,
                revokedAt: revokedAt
            )
        }
    }

    public func addAPIKey(_ key: APIKeyRecord) async throws(StoreFailure) {
        let hash = ByteBuffer(bytes: key.hash)
        try await self.change(
            "INSERT INTO salvo.api_keys (id, name, hash, created_at) VALUES (\(key.id), \(key.name), \(hash), \(key.createdAt))"
        )
    }

    public func revokeAPIKey(id: String, now: Int64) async throws(StoreFailure) -> Bool {
        try await self.change(
            "UPDATE salvo.api_keys SET revoked_at = \(now) WHERE id = \(id) AND revoked_at IS NULL"
        ) > 0
    }

    public func forgetIdempotencyKeys(before: Int64) async throws(StoreFailure) {
        try await self.change("DELETE FROM salvo.idempotency WHERE created_at < \(before)")
    }

    public func checkWritable() async throws(StoreFailure) {
        let value = String(Int64.random(in: 0...Int64.max))
        try await self.change(
            """
            INSERT INTO salvo.meta (key, value) VALUES ('checked', \(value))
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
            """
        )
    }
}

extension PostgresRandomAccessRow {
    /// A notification record's last two columns (`answered_at`, `uncertain_resends`), past what one tuple decodes.
    fileprivate func decodeTail() throws -> (Int64?, Int) {
        (try self[11].decode(Int64?.self), try self[12].decode(Int.self))
    }
}
