import APNSWire
import GRDB
import GRDBSQLite

/// Reads notifications' records from the embedded store within one read transaction: a notification from its
/// request row (found by its batch and index, or by the table of ids of notifications whose ids are not their
/// batch's), its state and answer from its outcome row, or, without one, from where it stands to the cursor
/// (after it: queued; up to it: being sent, since the claim that handed it out).
struct SQLiteRecordReader {
    private let cursor: Int
    private var requests: [String: [SQLiteRequestRow]] = [:]

    init(_ db: Database) throws {
        self.cursor = try SQLiteNotificationStore.marks(db).cursor
    }

    /// The record of the notification `id`, if there is one.
    mutating func record(id: String, _ db: Database) throws -> NotificationRecord? {
        if let (batch, index) = NotificationIDs.locate(id) {
            var seen = 0
            for request in try self.requests(batch: batch, db) {
                defer { seen += request.notifications.count }
                guard index - seen < request.notifications.count else { continue }
                let notification = request.notifications[index - seen]
                guard notification.id == id else { break }
                return try self.record(request, seq: request.firstSeq + index - seen, db)
            }
        }
        let find = try SQLiteNotificationStore.statement("SELECT seq FROM notification_ids WHERE id = ?", db)
        find.bind(1, id)
        guard try find.next(), let seq = find.int(0) else { return nil }
        sqlite3_reset(find.statement)
        var rows = SQLiteRequestRows()
        guard let (request, notification) = try rows.row(holding: seq, db), notification.id == id else { return nil }
        return try self.record(request, seq: seq, db)
    }

    /// The records of a batch's notifications, in the order they were posted; empty when there is no such batch.
    mutating func batch(_ id: String, _ db: Database) throws -> [NotificationRecord] {
        var records: [NotificationRecord] = []
        for request in try self.requests(batch: id, db) {
            for seq in request.seqs { records.append(try self.record(request, seq: seq, db)) }
        }
        return records
    }

    private mutating func requests(batch: String, _ db: Database) throws -> [SQLiteRequestRow] {
        if let known = self.requests[batch] { return known }
        let find = try SQLiteNotificationStore.statement(
            "SELECT \(SQLiteRequestRow.columns) FROM requests WHERE batch = ? ORDER BY first_seq",
            db
        )
        find.bind(1, batch)
        var rows: [SQLiteRequestRow] = []
        while try find.next() { rows.append(try SQLiteRequestRow(statement: find)) }
        self.requests[batch] = rows
        return rows
    }

    private func record(_ request: SQLiteRequestRow, seq: Int, _ db: Database) throws -> NotificationRecord {
        let notification = request.notifications[seq - request.firstSeq]
        let outcome = try SQLiteNotificationStore.statement(
            """
            SELECT state, status, reason, apns_id, apns_unique_id, unregistered_at, sent_at, answered_at,
                uncertain_resends
            FROM outcomes WHERE seq = ?
            """,
            db
        )
        outcome.bind(1, seq)
        var record = NotificationRecord(
            id: notification.id,
            batch: request.batch,
            token: notification.token.hexString,
            state: seq <= self.cursor ? .sending : .queued,
            acceptedAt: request.acceptedAt
        )
        record.apnsID = notification.headers.id
        if try outcome.next() {
            record.state = NotificationState(rawValue: outcome.int(0) ?? 0) ?? .queued
            record.status = outcome.int(1)
            record.reason = outcome.text(2)
            record.apnsID = outcome.text(3) ?? record.apnsID
            record.apnsUniqueID = outcome.text(4)
            record.unregisteredAt = outcome.int(5).map { Int64($0) }
            record.sentAt = outcome.int(6).map { Int64($0) }
            record.answeredAt = outcome.int(7).map { Int64($0) }
            record.uncertainResends = outcome.int(8) ?? 0
            sqlite3_reset(outcome.statement)
        } else if seq <= self.cursor {
            let claim = try SQLiteNotificationStore.statement(
                "SELECT at FROM claims WHERE through >= ? ORDER BY through LIMIT 1",
                db
            )
            claim.bind(1, seq)
            if try claim.next() {
                record.sentAt = claim.int(0).map { Int64($0) }
                sqlite3_reset(claim.statement)
            }
        }
        return record
    }
}
