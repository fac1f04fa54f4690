import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import SalvoRows

/// Records gone tokens in a PostgreSQL table (`send --write-back`, `feedback --into-postgres`): one connection, the
/// tokens in batches of `batchSize`, each batch one statement (`WriteBackStatement`, the batch bound as arrays), so
/// each batch is committed whole or not at all, and a batch that fails leaves the ones before it written.
///
/// Bounded: the connect by the location's `connect_timeout`, the whole write-back by `timeout` (the connection is
/// closed then, and what is left counts as failed).
public struct PostgresWriteBack: GoneTokenRecorder {
    public let location: PostgresLocation
    public let statement: WriteBackStatement
    /// The `job` value written with each token (`:job`).
    public let job: String
    /// Tokens a statement.
    public var batchSize = 1000
    /// The longest the whole write-back may take, the connect included.
    public var timeout: Duration = .seconds(120)

    public init(location: PostgresLocation, statement: WriteBackStatement, job: String) {
        self.location = location
        self.statement = statement
        self.job = job
    }

    public var destination: String { "\(self.statement.target) at \(self.location.server)" }

    public func record(_ tokens: [GoneToken]) async -> WriteBackReport {
        let unique = GoneToken.unique(tokens)
        var tally = WriteBackTally(destination: self.destination, tokens: unique.count)
        // Nothing gone: no connection at all.
        guard !unique.isEmpty else { return tally.report }
        // The deadline counts from before the connect: the timeout bounds the whole write-back.
        let deadline = NIODeadline.now() + .nanoseconds(Int64(self.timeout.nanoseconds))
        let connection: PostgresConnection
        switch await self.connect() {
        case .success(let opened): connection = opened
        case .failure(let failure):
            tally.fail(failure.message)
            return tally.report
        }
        let limit = self.timeout
        // Closing the connection fails the statement in flight: the deadline holds whatever the server does. It is
        // kept on the connection's event loop, not by a task: a task's sleep and its end need a thread of the
        // concurrency pool, which a caller's blocking work may hold for longer than the deadline.
        let expired = NIOLockedValueBox(false)
        let watchdog = connection.eventLoop.scheduleTask(deadline: deadline) {
            expired.withLockedValue { $0 = true }
            connection.close().whenComplete { _ in }
        }
        var start = 0
        while start < unique.count {
            let batch = unique[start..<min(start + self.batchSize, unique.count)]
            do {
                let result = try await connection.query(self.query(batch), logger: Self.logger).get()
                tally.committed(batch.count, rowsWritten: result.metadata.rows ?? 0)
            } catch {
                watchdog.cancel()
                // The deadline, whichever side kept it: this side closed the connection, or (on a loaded machine, the
                // watchdog late) the server's own statement timeout cancelled the statement first (57014).
                let timedOut = expired.withLockedValue { $0 } || Self.isStatementTimeout(error)
                tally.fail(
                    timedOut
                        ? "the write-back did not finish within \(limit.components.seconds) s"
                        : Self.describe(error)
                )
                try? await connection.close()
                return tally.report
            }
            start += batch.count
        }
        watchdog.cancel()
        try? await connection.close()
        return tally.report
    }

    /// Logs in and runs the statement with no token inside a transaction rolled back, so that a caller whose tokens
    /// cannot be read twice (the feedback service empties its list once read) learns of a refused login, a missing
    /// table or a statement the server refuses before it reads them. Bounded by `timeout`.
    ///
    /// - Returns: why the write-back would fail, or nil when it can be done.
    public func check() async -> String? {
        let connection: PostgresConnection
        switch await self.connect() {
        case .success(let opened): connection = opened
        case .failure(let failure): return failure.message
        }
        let watchdog = connection.eventLoop.scheduleTask(in: .nanoseconds(Int64(self.timeout.nanoseconds))) {
            connection.close().whenComplete { _ in }
        }
        defer { watchdog.cancel() }
        do {
            _ = try await connection.query("BEGIN", logger: Self.logger).get()
            _ = try await connection.query(self.query([][...]), logger: Self.logger).get()
            _ = try await connection.query("ROLLBACK", logger: Self.logger).get()
        } catch {
            try? await connection.close()
            return "\(self.destination): \(Self.describe(error))"
        }
        try? await connection.close()
        return nil
    }

    /// A connection with the server's statement limit set a second past `timeout`, or why it could not be opened.
    private func connect() async -> Result<PostgresConnection, ConnectFailure> {
        do {
            var configuration = try self.location.configuration()
            // The server gives up on a statement too, soon after this side does: a statement left at the deadline
            // does not go on running there.
            let serverLimit = (self.timeout + .seconds(1)).components.seconds * 1000
            configuration.options.additionalStartupParameters.append(("statement_timeout", "\(serverLimit)"))
            return .success(
                try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.logger)
            )
        } catch {
            // The source's words for the same failure (refused login, no server, no TLS), naming no option.
            let failure = PostgresFailure.connecting(error, to: self.location).message
            return .failure(
                ConnectFailure(message: failure.hasPrefix("--from-postgres ") ? String(failure.dropFirst(16)) : failure)
            )
        }
    }

    private struct ConnectFailure: Error {
        var message: String
    }

    /// The statement for one batch, its arrays bound in the statement's parameter order.
    func query(_ batch: ArraySlice<GoneToken>) -> PostgresQuery {
        var binds = PostgresBindings(capacity: self.statement.parameters.count)
        for parameter in self.statement.parameters {
            switch parameter {
            case .tokens: binds.append(batch.map(\.token))
            case .reasons: binds.append(batch.map(\.reason))
            case .reportedAt: binds.append(WriteBackStatement.timestampArray(batch.map(\.reportedAt)))
            case .job: binds.append(self.job)
            }
        }
        return PostgresQuery(unsafeSQL: self.statement.sql, binds: binds)
    }

    private static let logger = Logger(label: "salvo.write-back", factory: { _ in SwiftLogNoOpLogHandler() })

    /// What went wrong, as the server said it (`ERROR 42P01: relation "gone" does not exist`), or the connection.
    /// Whether the server cancelled the statement for its `statement_timeout` (SQLSTATE 57014, query_canceled).
    static func isStatementTimeout(_ error: any Error) -> Bool {
        (error as? PSQLError)?.serverInfo?[.sqlState] == "57014"
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError, error.serverInfo != nil { return PostgresFailure.serverMessage(error) }
        return PostgresFailure.describe(error)
    }
}

/// The counts of a write-back as its batches commit or fail: pure, the report's numbers in one place.
struct WriteBackTally {
    private(set) var report: WriteBackReport
    private var done = 0

    init(destination: String, tokens: Int) {
        self.report = WriteBackReport(destination: destination, tokens: tokens)
    }

    /// A batch of `count` tokens committed, `rowsWritten` of them new (the rest were there already).
    mutating func committed(_ count: Int, rowsWritten: Int) {
        self.done += count
        self.report.written += rowsWritten
        self.report.alreadyRecorded += max(0, count - rowsWritten)
    }

    /// The write-back stopped: every token not committed yet failed.
    mutating func fail(_ error: String) {
        self.report.failed = self.report.tokens - self.done
        self.report.error = error
    }
}
