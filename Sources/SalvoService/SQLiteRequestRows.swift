import APNSWire
import GRDB
import GRDBSQLite

/// One row of the embedded store's `requests` table: a request's accepted notifications, the sequence numbers
/// `firstSeq ..< firstSeq + count` theirs in order.
struct SQLiteRequestRow: Sendable {
    var firstSeq: Int
    var batch: String
    var acceptedAt: Int64
    var notifications: [ServiceNotification]

    var seqs: Range<Int> { self.firstSeq..<self.firstSeq + self.notifications.count }

    func notification(seq: Int) -> ServiceNotification? {
        self.seqs.contains(seq) ? self.notifications[seq - self.firstSeq] : nil
    }

    /// The columns `init(statement:)` reads, in order.
    static let columns = "first_seq, batch, accepted_at, body"

    init(firstSeq: Int, batch: String, acceptedAt: Int64, notifications: [ServiceNotification]) {
        self.firstSeq = firstSeq
        self.batch = batch
        self.acceptedAt = acceptedAt
        self.notifications = notifications
    }

    /// The row at a statement's current step, its first four columns `columns`.
    init(statement: SQLiteStatementBinding) throws(StoreFailure) {
        let batch = statement.text(1) ?? ""
        self.init(
            firstSeq: statement.int(0) ?? 0,
            batch: batch,
            acceptedAt: Int64(statement.int(2) ?? 0),
            notifications: try PackedNotifications.decode(statement.blob(3), batch: batch)
        )
    }
}

/// The request rows one transaction has read, by the sequence numbers they hold: the rows of a cycle's outcomes and
/// claims come from a few requests each, each read and unpacked once.
struct SQLiteRequestRows {
    private var rows: [SQLiteRequestRow] = []
    private var last: Int?

    /// The request that holds `seq`, with its notification.
    mutating func row(
        holding seq: Int,
        _ db: Database
    ) throws -> (SQLiteRequestRow, ServiceNotification)? {
        if let last, let notification = self.rows[last].notification(seq: seq) {
            return (self.rows[last], notification)
        }
        if let index = self.rows.firstIndex(where: { $0.seqs.contains(seq) }) {
            self.last = index
            return (self.rows[index], self.rows[index].notifications[seq - self.rows[index].firstSeq])
        }
        let find = try SQLiteNotificationStore.statement(
            "SELECT \(SQLiteRequestRow.columns) FROM requests WHERE first_seq <= ? ORDER BY first_seq DESC LIMIT 1",
            db
        )
        find.bind(1, seq)
        guard try find.next() else { return nil }
        let row = try SQLiteRequestRow(statement: find)
        sqlite3_reset(find.statement)
        guard let notification = row.notification(seq: seq) else { return nil }
        self.rows.append(row)
        self.last = self.rows.count - 1
        return (row, notification)
    }
}
