import Logging
import NIOCore
import PostgresNIO
import SalvoPostgres
import SalvoRows
import SalvoService

/// What a PostgreSQL server has spent so far, for the cost of a run on it: its processes' CPU (when it runs on this
/// machine) and the write-ahead log it wrote.
public struct PostgresServerSample: Sendable {
    /// CPU seconds of the server's processes: the postmaster, its living children, and the children it has reaped
    /// (`ProcessTreeCPU`). Nil when the server is not a process of this machine.
    public var cpuSeconds: Double?
    /// The log's current position in bytes (`pg_current_wal_lsn()`): the difference of two samples is every byte of
    /// log written between them, whoever wrote it.
    public var walPosition: UInt64
    /// `pg_stat_wal` (PostgreSQL 14 and later; nil before): records, full-page images and bytes, as the server's
    /// statistics had them (a session still open reports its own at most a second late).
    public var walStatistics: (records: Int64, fullPageImages: Int64, bytes: Int64)?
}

/// A connection of its own to the server of a PostgreSQL store, for what `salvo-bench queue` asks it directly: the
/// samples before and after a run, and whether the store is empty. Every statement is bounded by the server
/// (`statement_timeout`, 30 s) and the connection by the location's connect timeout.
public struct PostgresServerProbe: Sendable {
    public let location: PostgresLocation

    public init(location: PostgresLocation) { self.location = location }

    private static let logger = Logger(label: "salvo.bench.probe", factory: { _ in SwiftLogNoOpLogHandler() })

    public func sample() async throws(StoreFailure) -> PostgresServerSample {
        let local = self.isLoopback
        let (postmaster, position, statistics) = try await self.withConnection { connection in
            var backend: Int32 = 0
            var position: UInt64 = 0
            let now = try await connection.query(
                "SELECT pg_backend_pid(), pg_current_wal_lsn()::text",
                logger: Self.logger
            )
            for try await row in now {
                let (pid, lsn) = try row.decode((Int32, String).self)
                backend = pid
                position = Self.walBytes(lsn) ?? 0
            }
            var statistics: (Int64, Int64, Int64)?
            let has = try await connection.query(
                "SELECT to_regclass('pg_catalog.pg_stat_wal') IS NOT NULL",
                logger: Self.logger
            )
            var present = false
            for try await row in has { present = try row.decode(Bool.self) }
            if present {
                let rows = try await connection.query(
                    "SELECT wal_records, wal_fpi, wal_bytes::bigint FROM pg_stat_wal",
                    logger: Self.logger
                )
                for try await row in rows { statistics = try row.decode((Int64, Int64, Int64).self) }
            }
            // The postmaster is the parent of this session's backend, found while the backend lives (it ends when
            // the connection closes); a server elsewhere has no process here. /proc is read off the cooperative pool.
            let pid = backend
            let postmaster = local ? await BlockingWork.run { ProcessTreeCPU.postmaster(ofBackend: pid) } : nil
            return (postmaster, position, statistics)
        }
        let cpu = await BlockingWork.run { postmaster.flatMap(ProcessTreeCPU.seconds(root:)) }
        return PostgresServerSample(cpuSeconds: cpu, walPosition: position, walStatistics: statistics)
    }

    /// Notifications in the store's table (its schema made already).
    public func notificationCount() async throws(StoreFailure) -> Int {
        try await self.withConnection { connection in
            var count = 0
            for try await row in try await connection.query(
                "SELECT count(*) FROM salvo.notifications",
                logger: Self.logger
            ) {
                count = try row.decode(Int.self)
            }
            return count
        }
    }

    /// A WAL position (`16/B374D848`) in bytes.
    static func walBytes(_ lsn: String) -> UInt64? {
        let parts = lsn.split(separator: "/")
        guard parts.count == 2, let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16) else {
            return nil
        }
        return high << 32 | low
    }

    /// The server is on this machine's loopback (or a Unix socket): its processes may be read from /proc.
    private var isLoopback: Bool {
        let host = self.location.host
        return host == "localhost" || host == "::1" || host.hasPrefix("127.") || host.hasPrefix("/")
    }

    private func withConnection<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws(StoreFailure) -> T {
        let location = self.location
        var configuration: PostgresConnection.Configuration
        do {
            configuration = try location.configuration()
        } catch {
            throw StoreFailure(error.message)
        }
        configuration.options.additionalStartupParameters += [("statement_timeout", "30000")]
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.logger)
        } catch {
            throw StoreFailure(PostgresFailure.connecting(error, to: location).message)
        }
        do {
            let value = try await body(connection)
            try? await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw StoreFailure(PostgresFailure.querying(error, query: "the benchmark's probe", at: location).message)
        }
    }
}
