import GRDBSQLite

/// A prepared statement of the store's cycle, bound and read through SQLite's C interface.
///
/// Written by hand, beside GRDB, because it is the service's hot path: a cycle binds 16 values for every
/// notification it stores and 9 for every outcome. GRDB's `StatementArguments` builds an array of boxed values per
/// row (half the writer's time in a trial of 100,000 rows, with SQLite's own work a seventh of it); here a value
/// goes from the row to SQLite, copied once by SQLite itself. The statement is one of GRDB's cached statements, so
/// it is prepared once per connection, and this type never outlives the write it was made in.
struct SQLiteStatementBinding {
    let statement: OpaquePointer
    let connection: OpaquePointer

    /// SQLite copies the value before the bind returns (`SQLITE_TRANSIENT`).
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

    init(statement: OpaquePointer, connection: OpaquePointer) {
        self.statement = statement
        self.connection = connection
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    func bind(_ index: Int32, _ value: Int) {
        sqlite3_bind_int64(self.statement, index, Int64(value))
    }

    func bind(_ index: Int32, _ value: Int?) {
        guard let value else { return self.bindNull(index) }
        sqlite3_bind_int64(self.statement, index, Int64(value))
    }

    func bind(_ index: Int32, _ value: String?) {
        guard var value else { return self.bindNull(index) }
        value.withUTF8 { bytes in
            _ = bytes.withMemoryRebound(to: CChar.self) { text in
                sqlite3_bind_text(self.statement, index, text.baseAddress, Int32(text.count), Self.transient)
            }
        }
    }

    func bind(_ index: Int32, blob: [UInt8]) {
        blob.withUnsafeBytes { bytes in
            // A non-nil pointer even for no bytes: SQLite stores NULL for a nil one, and the column says NOT NULL.
            _ = sqlite3_bind_blob(
                self.statement,
                index,
                bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                Int32(bytes.count),
                Self.transient
            )
        }
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(self.statement, index)
    }

    /// Runs a statement that returns no row, and makes it ready for the next.
    func run() throws(StoreFailure) {
        let code = sqlite3_step(self.statement)
        sqlite3_reset(self.statement)
        guard code == SQLITE_DONE else { throw self.failure(code) }
    }

    /// Steps to the next row the statement returns: false once there is none (and the statement is reset).
    func next() throws(StoreFailure) -> Bool {
        let code = sqlite3_step(self.statement)
        if code == SQLITE_ROW { return true }
        sqlite3_reset(self.statement)
        guard code == SQLITE_DONE else { throw self.failure(code) }
        return false
    }

    func int(_ column: Int32) -> Int? {
        guard sqlite3_column_type(self.statement, column) != SQLITE_NULL else { return nil }
        return Int(sqlite3_column_int64(self.statement, column))
    }

    func text(_ column: Int32) -> String? {
        guard sqlite3_column_type(self.statement, column) != SQLITE_NULL,
            let text = sqlite3_column_text(self.statement, column)
        else { return nil }
        let count = Int(sqlite3_column_bytes(self.statement, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(self.statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(self.statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    private func failure(_ code: Int32) -> StoreFailure {
        StoreFailure("SQLite error \(code): \(String(cString: sqlite3_errmsg(self.connection)))")
    }
}
