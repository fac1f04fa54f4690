import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// A query's rows copied into a CSV file, which a job then reads as any token file under the name `postgres`.
///
/// The rows are streamed: the server writes them as CSV (`COPY (query) TO STDOUT`, read by `CopyOutHandler`), and each
/// is written into the file as it arrives, on the connection's event loop, before the socket is read again (the
/// server waits on TCP meanwhile), through one fixed buffer, so memory stays bounded whatever the query returns. The
/// file has a header row of the query's column names, then one record per row, each column as PostgreSQL's text form shows it (the server writes the CSV); a NULL is an
/// empty field, so that a row with a NULL token is refused as the CSV path refuses an empty one, with its line.
///
/// With a journal the file is `DIR/postgres.csv` (written beside as `postgres.csv.partial`, synced and renamed when
/// whole; `postgres.lock` held meanwhile), the snapshot that a rerun of the job resumes against without reading the
/// table again. Without one it is a temporary file unlinked as soon as it is made, read through `/proc/self/fd` while
/// it is written (`streamToTemporaryFile`): the job sends the first rows while the last still arrive.
public enum PostgresSpool {
    /// How every list of input files, the rejects' `file` column and every message name the query's rows.
    public static let inputName = "postgres"

    /// The snapshot's name in a journal folder.
    public static func journalPath(_ directory: String) -> String { directory + "/postgres.csv" }

    /// What a copy wrote.
    public struct Snapshot: Sendable, Hashable {
        /// The file the job reads.
        public var path: String
        /// The query's rows (the header not counted).
        public var rows: Int
        /// The rows whose token is NULL: written with an empty token, which the job refuses with its line.
        public var nullTokens: Int
        /// The rows (1-based, in the query's order) of the first NULL tokens, at most ten.
        public var firstNullRows: [Int]
        /// The query's columns, in order: the header row.
        public var columns: [String]
        public var bytes: Int
        /// SHA-256 of the file, hex, computed as it was written.
        public var sha256: String
    }

    /// Runs `query` on the server at `location` and writes its rows into the journal folder `directory` (made if
    /// missing) as `postgres.csv`.
    ///
    /// - Parameters:
    ///   - readOnly: the session's transactions are read-only (`default_transaction_read_only`): the query can change
    ///     nothing (the service's campaigns, whose queries come from its callers).
    ///   - releasingLock: the folder's lock is let go once the snapshot is whole or discarded, instead of being held
    ///     for the life of the process (a process that runs many jobs, and may take a snapshot again after a failure).
    /// - Throws: `JobError` as `copy` does; `JobError(.output)` when the folder or the snapshot cannot be written.
    public static func spool(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        intoJournal directory: String,
        readOnly: Bool = false,
        releasingLock: Bool = false
    ) async throws(JobError) -> Snapshot {
        // `postgres.lock`: two runs started together over one journal never write one snapshot at once.
        let file = try await BlockingWork.run { () throws(JobError) in
            try SpoolFile.inJournal(
                directory,
                fileName: "postgres.csv",
                lockName: "postgres.lock",
                what: "the snapshot of the query",
                busy: "another run is taking or sending its snapshot of the query; the query was not run"
            )
        }
        defer { if releasingLock { file.releaseLock() } }
        var snapshot: Snapshot
        do throws(JobError) {
            snapshot = try await Self.copy(
                query: query,
                from: location,
                tokenColumn: tokenColumn,
                to: file.descriptor,
                name: file.name,
                readOnly: readOnly
            )
        } catch {
            await BlockingWork.run { file.discard() }
            throw error
        }
        try await BlockingWork.run { () throws(JobError) in try file.commit() }
        snapshot.path = file.path
        return snapshot
    }

    /// The columns `query` returns, as the server describes it without running it (Parse and Describe, the copy's
    /// first step): a query the server refuses, or one without a usable token column, throws as `copy` does, and
    /// nothing is read.
    ///
    /// - Throws: `JobError(.unreachable)`, `JobError(.credentials)` as `copy`; `JobError(.input)` with the server's
    ///   message (and the position in the query) for a query it refuses, or for a token column that is missing or not
    ///   text.
    public static func describe(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        readOnly: Bool = false
    ) async throws(JobError) -> [String] {
        let statement = try Self.statement(query)
        let (channel, connection) = try await Self.connect(to: location, readOnly: readOnly)
        let promise = channel.eventLoop.makePromise(of: CopyOutHandler.Outcome.self)
        let handler = CopyOutHandler(
            query: statement,
            copyStatement: nil,
            described: { columns throws(JobError) in try ResultTable(columns, tokenColumn: tokenColumn).tokenIndex },
            writer: nil,
            firstRow: nil,
            promise: promise
        )
        let outcome = try await Self.exchange(handler, promise: promise, on: channel, connection, query, location)
        switch outcome {
        case .described(let columns):
            return columns
        case .serverError(let fields, _):
            throw PostgresFailure.queryFailed(fields: fields, query: query, positionOffset: 0, at: location)
        case .failed(let error):
            throw error
        case .connectionLost(let reason):
            throw JobError(
                .unreachable,
                "\(location.option) \(location.redacted): the connection was lost while the query was described: "
                    + reason
            )
        case .copied:
            throw JobError(.input, "the server ran the query where only its description was asked for")
        }
    }

    /// A query's rows being written into a temporary file while a job reads them (`GrowingInput`).
    public struct Stream: Sendable {
        /// The file the job reads (`/proc/self/fd/N` of a file unlinked at once).
        public var path: String
        /// What the job's reader of `path` waits on at its end (`InputSpools.Spool.growing`).
        public var growing: GrowingInput
        /// The query's columns, in order: the header row.
        public var columns: [String]
        /// Waits for the copy's end: what it wrote, or why it failed (the job's reader has been told either way).
        public var ended: @Sendable () async -> Result<Snapshot, JobError>
    }

    /// Runs `query` and writes its rows into a temporary file in `folder` (`TMPDIR`, else `/tmp`, unlinked at once)
    /// while a job reads it: returns once the header and the first row are in the file, and goes on writing the rest
    /// as the rows arrive. The first rows are sent while the last are still coming, and the snapshot is not hashed (no
    /// journal keeps it).
    ///
    /// A query that fails, returns no rows or has no usable token column before its first row throws here, before
    /// anything is sent. One that fails later ends the input there: the job's reader fails with the reason (the job
    /// stops as for an unreadable file, its unsent rows counted). A server that goes quiet for `stallLimit` mid-copy
    /// fails the same way.
    public static func streamToTemporaryFile(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        in folder: String? = nil,
        stallLimit: Duration = .seconds(120)
    ) async throws(JobError) -> Stream {
        let file = try SpoolFile.temporary(in: folder, prefix: "salvo-postgres", what: "the snapshot of the query")
        let path = file.path
        let growing = GrowingInput(writerName: "the query's rows from \(location.redacted)", stallLimit: stallLimit)
        let started = StreamStart()
        let copying = Task { () -> Result<Snapshot, JobError> in
            do throws(JobError) {
                var snapshot = try await Self.copy(
                    query: query,
                    from: location,
                    tokenColumn: tokenColumn,
                    to: file.descriptor,
                    name: file.name,
                    growing: growing,
                    firstRow: { columns in started.settle(.success(columns)) },
                    silenceLimit: stallLimit
                )
                snapshot.path = path
                growing.finish()
                return .success(snapshot)
            } catch {
                growing.fail(error.message)
                started.settle(.failure(error))
                return .failure(error)
            }
        }
        switch await started.result() {
        case .success(let columns):
            return Stream(path: path, growing: growing, columns: columns, ended: { await copying.value })
        case .failure(let error):
            file.discard()
            throw error
        }
    }

    /// When the journal folder's snapshot was taken (its modification time), nil when it has none.
    public static func snapshotTime(journal directory: String) -> Date? {
        var status = stat()
        guard stat(Self.journalPath(directory), &status) == 0 else { return nil }
        return Date(timeIntervalSince1970: Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
    }

    /// Connects to `location`, runs `query` and writes its rows as CSV into `descriptor`.
    ///
    /// The server writes the CSV (`COPY (query) TO STDOUT`, `CopyOutHandler`): each column in PostgreSQL's own text
    /// form, in a session whose time zone is UTC and date style ISO, so that times read `2026-11-23 17:29:49.5+00`
    /// wherever the server is. The header row is the columns' names as the query's description gives them.
    ///
    /// - Parameter name: the file's name, for messages.
    /// - Throws: `JobError(.unreachable)` when the server cannot be reached; `JobError(.credentials)` when it refuses
    ///   the login; `JobError(.input)` when the query fails (with the server's message), returns no rows, has no
    ///   token column or a token column that is not text; `JobError(.output)` when the file cannot be written.
    ///
    /// With `growing`, the file is read while it is written: the writer tells `growing` how far it is after every
    /// write (the caller ends it), the bytes are not hashed, and `firstRow` is called once the header and the first
    /// row are in the file.
    static func copy(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        to descriptor: Int32,
        name: String,
        growing: GrowingInput? = nil,
        firstRow: (@Sendable (_ columns: [String]) -> Void)? = nil,
        silenceLimit: Duration = .seconds(120),
        readOnly: Bool = false
    ) async throws(JobError) -> Snapshot {
        let statement = try Self.statement(query)
        let (channel, connection) = try await Self.connect(to: location, readOnly: readOnly)
        let writer = CSVSpoolWriter(descriptor: descriptor, name: name, hashing: growing == nil, growing: growing)
        let promise = channel.eventLoop.makePromise(of: CopyOutHandler.Outcome.self)
        let handler = CopyOutHandler(
            query: statement,
            copyStatement: Self.copyPrefix + statement + "\n) TO STDOUT (FORMAT csv)",
            described: { columns throws(JobError) in
                let table = try ResultTable(columns, tokenColumn: tokenColumn)
                table.writeHeader(to: writer)
                return table.tokenIndex
            },
            writer: writer,
            firstRow: firstRow,
            promise: promise,
            silenceLimit: .nanoseconds(Int64(silenceLimit.nanoseconds))
        )
        let outcome = try await Self.exchange(handler, promise: promise, on: channel, connection, query, location)
        switch outcome {
        case .copied(let copied):
            guard copied.rows > 0 else {
                throw JobError(.input, "--query returned no rows from \(location.redacted): nothing to send")
            }
            return Snapshot(
                path: "",
                rows: copied.rows,
                nullTokens: copied.nullTokens,
                firstNullRows: copied.firstNullRows,
                columns: copied.columns,
                bytes: writer.bytes,
                sha256: writer.finish()
            )
        case .serverError(let fields, let phase):
            // The copy runs the query after `copyPrefix`: a position there is that many characters past the user's.
            throw PostgresFailure.queryFailed(
                fields: fields,
                query: query,
                positionOffset: phase == .copy ? -Self.copyPrefix.count : 0,
                at: location
            )
        case .failed(let error):
            throw error
        case .connectionLost(let reason):
            throw JobError(
                .unreachable,
                "\(location.option) \(location.redacted): the connection was lost while the query's rows were read: "
                    + reason
            )
        case .described:
            throw JobError(.input, "the server described the query and did not copy its rows")
        }
    }

    /// A connection to `location`, logged in, in a session whose time zone is UTC and date style ISO (and whose
    /// transactions are read-only with `readOnly`).
    private static func connect(
        to location: PostgresLocation,
        readOnly: Bool
    ) async throws(JobError) -> (any Channel, PostgresConnection) {
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: PostgresConnection.defaultEventLoopGroup)
                .connectTimeout(location.connectTimeAmount)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .connect(host: location.host, port: location.port).get()
        } catch {
            throw PostgresFailure.connecting(error, to: location)
        }
        var configuration = try location.configuration(over: channel)
        configuration.options.additionalStartupParameters += [
            ("client_encoding", "UTF8"), ("TimeZone", "UTC"), ("DateStyle", "ISO, MDY"), ("extra_float_digits", "1"),
        ]
        if readOnly {
            configuration.options.additionalStartupParameters.append(("default_transaction_read_only", "on"))
        }
        let logger = Logger(label: "salvo.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        do {
            let connection = try await PostgresConnection.connect(
                on: channel.eventLoop,
                configuration: configuration,
                id: 1,
                logger: logger
            )
            return (channel, connection)
        } catch {
            channel.close(promise: nil)
            throw PostgresFailure.connecting(error, to: location)
        }
    }

    /// Puts `handler` in front of PostgresNIO's (behind TLS when the connection has it), waits for its outcome and
    /// closes the connection.
    private static func exchange(
        _ handler: CopyOutHandler,
        promise: EventLoopPromise<CopyOutHandler.Outcome>,
        on channel: any Channel,
        _ connection: PostgresConnection,
        _ query: String,
        _ location: PostgresLocation
    ) async throws(JobError) -> CopyOutHandler.Outcome {
        let outcome: CopyOutHandler.Outcome
        do {
            try await channel.eventLoop.submit {
                let pipeline = channel.pipeline.syncOperations
                if let tls = try? pipeline.handler(type: NIOSSLClientHandler.self) {
                    try pipeline.addHandler(handler, position: .after(tls))
                } else {
                    try pipeline.addHandler(handler, position: .first)
                }
            }.get()
            outcome = try await promise.futureResult.get()
        } catch {
            try? await connection.close()
            throw PostgresFailure.querying(error, query: query, at: location)
        }
        try? await connection.close()
        return outcome
    }

    /// What stands before the query in the copy's statement (a line end, so that a comment ending the query ends
    /// before the parenthesis that closes it).
    static let copyPrefix = "COPY (\n"

    /// The query as it is sent: without the `;` and spaces that may end it (it runs inside `COPY (…)`).
    ///
    /// - Throws: `JobError(.input)` for an empty query or one holding a NUL character.
    static func statement(_ query: String) throws(JobError) -> String {
        var text = Substring(query)
        while let last = text.last, last == ";" || last.isWhitespace { text = text.dropLast() }
        guard !text.allSatisfy(\.isWhitespace) else { throw JobError(.input, "--query is empty") }
        guard !text.utf8.contains(0) else { throw JobError(.input, "--query holds a NUL character") }
        return String(text)
    }
}

/// The columns of a query's result as its description shows them: names, and which holds the tokens.
struct ResultTable {
    let names: [String]
    let tokenIndex: Int

    /// - Throws: `JobError(.input)` when no column is the token column, or the token column is not text.
    init(_ columns: [CopyOutHandler.Column], tokenColumn: TokenColumn) throws(JobError) {
        let names = columns.map(\.name)
        let index: Int
        switch tokenColumn {
        case .name(let name):
            // Matched without regard to case, as a CSV header's names are.
            guard let found = names.firstIndex(where: { $0.lowercased() == name.lowercased() }) else {
                throw JobError(
                    .input,
                    "--query returns no column named '\(name)' (it returns: \(names.joined(separator: ", "))): "
                        + "name the token column with --column, or alias it in the query (… AS \(name))"
                )
            }
            index = found
        case .number(let number):
            guard number >= 1 && number <= names.count else {
                throw JobError(
                    .input,
                    "--column \(number): --query returns \(names.count) column\(names.count == 1 ? "" : "s") "
                        + "(\(names.joined(separator: ", ")))"
                )
            }
            index = number - 1
        }
        let type = columns[index].type
        guard PostgresColumnType.holdsText(type) else {
            let cast = type == .bytea ? "encode(\(names[index]), 'hex')" : "\(names[index])::text"
            throw JobError(
                .input,
                "the token column \(names[index]) is of type \(PostgresColumnType.name(type)), not text: tokens are "
                    + "text (64 hex digits, or base64 with --token-encoding base64); convert it in the query (\(cast))"
            )
        }
        self.names = names
        self.tokenIndex = index
    }

    func writeHeader(to writer: CSVSpoolWriter) {
        for (index, name) in self.names.enumerated() {
            if index > 0 { writer.byte(UInt8(ascii: ",")) }
            var name = name
            name.withUTF8 { writer.field(UnsafeRawBufferPointer($0)) }
        }
        writer.byte(0x0A)
    }
}

/// The first row of a streamed copy, or its failure before one: settled once, awaited once.
final class StreamStart: Sendable {
    private let state = NIOLockedValueBox<
        (Result<[String], JobError>?, CheckedContinuation<Result<[String], JobError>, Never>?)
    >(
        (nil, nil)
    )

    func settle(_ result: Result<[String], JobError>) {
        let waiting = self.state.withLockedValue { state -> CheckedContinuation<Result<[String], JobError>, Never>? in
            guard state.0 == nil else { return nil }
            state.0 = result
            defer { state.1 = nil }
            return state.1
        }
        waiting?.resume(returning: result)
    }

    func result() async -> Result<[String], JobError> {
        await withCheckedContinuation { continuation in
            let ready = self.state.withLockedValue { state -> Result<[String], JobError>? in
                if let result = state.0 { return result }
                state.1 = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
