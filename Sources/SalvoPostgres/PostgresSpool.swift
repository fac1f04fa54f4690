import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// A query's rows copied into a CSV file, which a job then reads as any token file under the name `postgres`.
///
/// The rows are streamed: each is written as the driver decodes it, on the connection's event loop, before the
/// socket is read again (the server waits on TCP meanwhile), and the CSV goes through one fixed buffer, so memory stays
/// bounded whatever the query returns. The file has a header row of the query's column names,
/// then one record per row, each column as PostgreSQL's text form shows it (`PostgresColumnFormat`); a NULL is an
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
    /// - Throws: `JobError` as `copy` does; `JobError(.output)` when the folder or the snapshot cannot be written.
    public static func spool(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        intoJournal directory: String
    ) async throws(JobError) -> Snapshot {
        // `postgres.lock`: two runs started together over one journal never write one snapshot at once.
        let file = try SpoolFile.inJournal(
            directory,
            fileName: "postgres.csv",
            lockName: "postgres.lock",
            what: "the snapshot of the query",
            busy: "another run is taking or sending its snapshot of the query; the query was not run"
        )
        var snapshot: Snapshot
        do throws(JobError) {
            snapshot = try await Self.copy(
                query: query,
                from: location,
                tokenColumn: tokenColumn,
                to: file.descriptor,
                name: file.name
            )
        } catch {
            file.discard()
            throw error
        }
        try file.commit()
        snapshot.path = file.path
        return snapshot
    }

    /// A query's rows being written into a temporary file while a job reads them (`GrowingInput`).
    public struct Stream: Sendable {
        /// The file the job reads (`/proc/self/fd/N` of a file unlinked at once).
        public var path: String
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
        GrowingInput.register(growing, path: path)
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
                    firstRow: { columns in started.settle(.success(columns)) }
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
            return Stream(path: path, columns: columns, ended: { await copying.value })
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
    /// - Parameter name: the file's name, for messages.
    /// - Throws: `JobError(.unreachable)` when the server cannot be reached; `JobError(.credentials)` when it refuses
    ///   the login; `JobError(.input)` when the query fails (with the server's message), returns no rows, has no
    ///   token column, a token column that is not text, or a column of a type that cannot be written as text;
    ///   `JobError(.output)` when the file cannot be written.
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
        firstRow: (@Sendable (_ columns: [String]) -> Void)? = nil
    ) async throws(JobError) -> Snapshot {
        let configuration = try location.configuration()
        let logger = Logger(label: "salvo.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        } catch {
            throw PostgresFailure.connecting(error, to: location)
        }
        let state = SpoolState(
            writer: CSVSpoolWriter(descriptor: descriptor, name: name, hashing: growing == nil, growing: growing),
            tokenColumn: tokenColumn,
            firstRow: firstRow
        )
        do {
            // Each row is written as it arrives, on the connection's event loop, before the next read from the
            // socket: what is held is at most one read's rows (the server waits on TCP meanwhile), and no row costs
            // a task switch.
            try await connection.query(query, onRow: { row in try state.take(row) }).get()
            state.writer.flush()
            if let failure = state.writer.failure { throw failure }
        } catch {
            try? await connection.close()
            if let error = error as? JobError { throw error }
            throw PostgresFailure.querying(error, query: query, at: location)
        }
        try? await connection.close()
        guard let table = state.table else {
            throw JobError(.input, "--query returned no rows from \(location.redacted): nothing to send")
        }
        return Snapshot(
            path: "",
            rows: state.rows,
            nullTokens: state.nullTokens,
            firstNullRows: state.firstNullRows,
            columns: table.names,
            bytes: state.writer.bytes,
            sha256: state.writer.finish()
        )
    }

}

/// A copy in progress: touched only on the connection's event loop, one row after another (hence unchecked).
final class SpoolState: @unchecked Sendable {
    let writer: CSVSpoolWriter
    let tokenColumn: TokenColumn
    @exclusivity(unchecked) private(set) var table: ResultTable?
    @exclusivity(unchecked) private(set) var rows = 0
    @exclusivity(unchecked) private(set) var nullTokens = 0
    @exclusivity(unchecked) private(set) var firstNullRows: [Int] = []

    /// Called once, with the columns, when the header and the first row are in the file (a streamed spool's reader
    /// may start).
    private var firstRow: (@Sendable (_ columns: [String]) -> Void)?

    init(writer: CSVSpoolWriter, tokenColumn: TokenColumn, firstRow: (@Sendable (_ columns: [String]) -> Void)? = nil) {
        self.writer = writer
        self.tokenColumn = tokenColumn
        self.firstRow = firstRow
    }

    /// Writes one row (the header first, from the first row's columns).
    ///
    /// - Throws: `JobError` as `ResultTable` does, or the writer's failure: the query is then cancelled.
    func take(_ row: PostgresRow) throws(JobError) {
        if self.table == nil {
            let table = try ResultTable(row, tokenColumn: self.tokenColumn)
            table.writeHeader(to: self.writer)
            self.table = table
        }
        self.rows += 1
        if try self.table!.write(row, number: self.rows, to: self.writer) {
            self.nullTokens += 1
            if self.firstNullRows.count < 10 { self.firstNullRows.append(self.rows) }
        }
        if let failure = self.writer.failure { throw failure }
        if let firstRow = self.firstRow {
            self.firstRow = nil
            self.writer.flush()
            if let failure = self.writer.failure { throw failure }
            firstRow(self.table?.names ?? [])
        }
    }
}

/// The columns of a query's result as the first row shows them: names, how each is written, which holds the tokens.
struct ResultTable {
    let names: [String]
    let formats: [PostgresColumnFormat]
    /// Per column, whether its bytes are its text (`PostgresColumnFormat.text`).
    let isText: [Bool]
    let tokenIndex: Int

    /// - Throws: `JobError(.input)` when no column is the token column, the token column is not text, or a column's
    ///   type cannot be written as text.
    init(_ row: PostgresRow, tokenColumn: TokenColumn) throws(JobError) {
        var names: [String] = []
        var formats: [PostgresColumnFormat] = []
        var types: [PostgresDataType] = []
        for cell in row {
            names.append(cell.columnName)
            types.append(cell.dataType)
            guard let format = PostgresColumnFormat(cell.dataType) else {
                throw JobError(
                    .input,
                    "--query returns the column \(cell.columnName) of type \(PostgresColumnFormat.name(cell.dataType)), "
                        + "which Salvo does not read: cast it to text in the query (\(cell.columnName)::text)"
                )
            }
            formats.append(format)
        }
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
        guard formats[index].holdsText else {
            let type = PostgresColumnFormat.name(types[index])
            let cast = types[index] == .bytea ? "encode(\(names[index]), 'hex')" : "\(names[index])::text"
            throw JobError(
                .input,
                "the token column \(names[index]) is of type \(type), not text: tokens are text (64 hex digits, or "
                    + "base64 with --token-encoding base64); convert it in the query (\(cast))"
            )
        }
        self.names = names
        self.formats = formats
        self.isText = formats.map { $0 == .text }
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

    /// Writes one row as a CSV record.
    ///
    /// - Returns: whether its token is NULL.
    /// - Throws: `JobError(.input)` naming the row and column when a value cannot be read as its type.
    func write(_ row: PostgresRow, number: Int, to writer: CSVSpoolWriter) throws(JobError) -> Bool {
        var nullToken = false
        var index = 0
        for cell in row {
            if index > 0 { writer.byte(UInt8(ascii: ",")) }
            if let bytes = cell.bytes {
                // Text, the common case, straight into the writer.
                if self.isText[index] {
                    bytes.withUnsafeReadableBytes { writer.field($0) }
                } else if let problem = self.formats[index].write(bytes, cell: cell, to: writer) {
                    throw JobError(
                        .input,
                        "--query row \(number), column \(cell.columnName) (\(PostgresColumnFormat.name(cell.dataType))): "
                            + "\(problem): cast it to text in the query (\(cell.columnName)::text)"
                    )
                }
            } else if index == self.tokenIndex {
                nullToken = true
            }
            index += 1
        }
        writer.byte(0x0A)
        return nullToken
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
