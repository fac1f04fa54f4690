import APNSWire
import Foundation
import GRDB

/// Moves a store's notifications of schema version 3 (a row a notification) into version 4's layout when the store
/// is opened by this Salvo, in the migration's transaction: each run of one batch's rows with consecutive sequence
/// numbers becomes a request row (their ids kept with them and in `notification_ids`, as they were made apart from
/// their batch's), each row an outcome row with its state, answer and times (a queued row's state says queued, so
/// it is claimed as a row given back), and the cursor is put after them all. Sequence numbers, ids, states and
/// answers stay as they were.
enum SQLiteLegacyRows {
    static func move(_ db: Database) throws {
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT seq, id, batch, token, payload, push_type, apns_id, expiration, priority, topic, collapse_id,
                    state, status, reason, apns_unique_id, unregistered_at, accepted_at, sent_at, answered_at,
                    uncertain_resends, webhook
                FROM notifications ORDER BY seq
                """
        )
        var run: [ServiceNotification] = []
        var runFirst = 0
        var runBatch = ""
        var runAccepted: Int64 = 0
        var last = 0
        func flush() throws {
            guard !run.isEmpty else { return }
            try db.execute(
                sql: "INSERT INTO requests (first_seq, batch, count, accepted_at, body) VALUES (?, ?, ?, ?, ?)",
                arguments: [
                    runFirst, runBatch, run.count, runAccepted,
                    Data(PackedNotifications.encode(run, batch: runBatch, explicitIDs: true)),
                ]
            )
            try SQLiteNotificationStore.rememberIDs(run, first: runFirst, db)
            run = []
        }
        while let row = try rows.next() {
            let seq: Int = row["seq"]
            let batch: String = row["batch"] ?? ""
            if batch != runBatch || seq != last + 1 || run.count >= 1_000 {
                try flush()
                runFirst = seq
                runBatch = batch
                runAccepted = row["accepted_at"] ?? 0
            }
            last = seq
            run.append(try Self.notification(row))
            try db.execute(
                sql: """
                    INSERT INTO outcomes (seq, state, status, reason, apns_id, apns_unique_id, unregistered_at,
                        sent_at, answered_at, uncertain_resends)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    seq, row["state"] as Int? ?? 0, row["status"] as Int?, row["reason"] as String?,
                    row["apns_id"] as String?, row["apns_unique_id"] as String?, row["unregistered_at"] as Int64?,
                    row["sent_at"] as Int64?, row["answered_at"] as Int64?, row["uncertain_resends"] as Int? ?? 0,
                ]
            )
        }
        try flush()
        if last > 0 {
            try db.execute(sql: "INSERT INTO claims (through, at) VALUES (?, 0)", arguments: [last])
        }
    }

    private static func notification(_ row: Row) throws -> ServiceNotification {
        let seq: Int = row["seq"]
        do {
            let headers = try APNSRequestHeaders(
                pushType: (row["push_type"] as String?).map { APNSPushType(rawValue: $0) },
                // The caller's or the notification's id, unless an answer's apns-id took its place (the row is then
                // final: its outcome row keeps that).
                id: (row["apns_id"] as String?).flatMap { APNSRequestHeaders.isCanonicalUUID($0) ? $0 : nil },
                expiration: (row["expiration"] as Int?).map { UInt32(clamping: $0) },
                priority: (row["priority"] as Int?).map { NotificationPriority(rawValue: UInt8(clamping: $0)) },
                topic: row["topic"],
                collapseID: row["collapse_id"]
            )
            return ServiceNotification(
                id: row["id"] ?? "",
                token: try DeviceToken(bytes: SQLiteNotificationStore.bytes(row, "token")),
                payload: SQLiteNotificationStore.bytes(row, "payload"),
                headers: headers,
                webhook: (row["webhook"] as Int?) == 1
            )
        } catch {
            throw StoreFailure("the store's notification \(seq) of schema version 3 cannot be moved: \(error)")
        }
    }
}
