import APNSWire
import Foundation
import GRDB
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoService

/// The embedded store's layout: notification ids made from their batch's (`NotificationIDs`), a request's
/// notifications packed in one value (`PackedNotifications`), and a store of schema version 3 (a row a notification)
/// moved to version 4 with its rows' states, answers and ids.
@Suite(.tags(.pure), .runs(.pure)) struct SQLiteLayoutTests {
    @Test func aNotificationsIDIsItsBatchsWithItsIndexAndIsFoundFromIt() {
        var system = SystemRandomNumberGenerator()
        let batch = NotificationIDs.batch(milliseconds: 1_764_000_000_000, using: &system)
        #expect(batch.hasSuffix("fff") && APNSRequestHeaders.isCanonicalUUID(batch), "\(batch)")
        #expect(batch.hasPrefix("019ab697-e800-7"), "\(batch)")
        let ids = (0..<1_000).map { NotificationIDs.notification(batch: batch, index: $0) }
        #expect(Set(ids).count == 1_000)
        #expect(ids[0].hasSuffix("000") && ids[999].hasSuffix("3e7") && ids[42].hasSuffix("02a"))
        for (index, id) in ids.enumerated() {
            #expect(APNSRequestHeaders.isCanonicalUUID(id), "\(id)")
            #expect(String(id.prefix(33)) == String(batch.prefix(33)))
            #expect(NotificationIDs.locate(id).map { [$0.batch, String($0.index)] } == [batch, String(index)])
            #expect(NotificationIDs.isNotification(id, of: batch, at: index))
        }
        // Not a notification's: the batch's own id, other text, another index or batch.
        #expect(NotificationIDs.locate(batch) == nil)
        #expect(NotificationIDs.locate("not-an-id") == nil)
        #expect(NotificationIDs.locate(String(batch.dropLast(3)) + "0g0") == nil)
        #expect(!NotificationIDs.isNotification(ids[1], of: batch, at: 2))
        let other = NotificationIDs.batch(milliseconds: 1_764_000_000_000, using: &system)
        #expect(other != batch)
        #expect(!NotificationIDs.isNotification(NotificationIDs.notification(batch: other, index: 1), of: batch, at: 1))
        #expect(!NotificationIDs.isNotification("00000000-0000-4000-8000-000000000001", of: batch, at: 1))
    }

    @Test func packedNotificationsComeBackAsTheyWent() throws {
        let batch = "019ab697-e800-7123-8456-789abcdeffff"
        var notifications: [ServiceNotification] = []
        for index in 0..<6 {
            let id = NotificationIDs.notification(batch: batch, index: index)
            var headers = try APNSRequestHeaders(id: id)
            if index % 2 == 0 { headers.pushType = .alert }
            if index % 3 == 0 { headers.topic = "com.example.app" }
            if index == 1 {
                headers.expiration = 1_800_000_000
                headers.priority = .powerConsiderate
                headers.collapseID = "order-7"
                headers.pushType = .liveActivity
                headers.topic = "com.example.app.push-type.liveactivity"
            }
            // The caller's own apns-id, kept beside the notification's id.
            if index == 4 { headers.id = "5a1f0000-0000-4000-8000-00000000cafe" }
            notifications.append(
                ServiceNotification(
                    id: id,
                    token: try DeviceToken(bytes: Array(repeating: UInt8(index), count: 32)),
                    payload: Array(#"{"aps":{"alert":"n\#(index)"}}"#.utf8),
                    headers: headers,
                    webhook: index == 2
                )
            )
        }
        let packed = PackedNotifications.encode(notifications, batch: batch)
        #expect(try PackedNotifications.decode(packed, batch: batch) == notifications)
        // A payload and a topic the previous notification had are kept once.
        let shared = try (0..<100).map { index in
            ServiceNotification(
                id: NotificationIDs.notification(batch: batch, index: index),
                token: try DeviceToken(bytes: Array(repeating: UInt8(index), count: 32)),
                payload: Array(#"{"aps":{"alert":"the same for all, as a campaign's"}}"#.utf8),
                headers: try APNSRequestHeaders(
                    pushType: .alert,
                    id: NotificationIDs.notification(batch: batch, index: index),
                    topic: "com.example.app"
                )
            )
        }
        let sharedPacked = PackedNotifications.encode(shared, batch: batch)
        #expect(try PackedNotifications.decode(sharedPacked, batch: batch) == shared)
        #expect(sharedPacked.count < 100 * 50, "\(sharedPacked.count) bytes")
        // A reference back with nothing before it is damage.
        let dangling: [UInt8] = [1, 0, 32] + Array(repeating: 7, count: 32) + [0xFF, 0xFF, 0xFF, 0xFF]
        #expect(throws: StoreFailure.self) { try PackedNotifications.decode(dangling, batch: batch) }
        // Ids that are not the batch's travel with their notifications.
        let apart = (0..<3).map { notification($0) }
        let explicit = PackedNotifications.encode(apart, batch: batch, explicitIDs: true)
        #expect(try PackedNotifications.decode(explicit, batch: batch) == apart)
        #expect(explicit.count > PackedNotifications.encode(apart, batch: batch).count)
        // A damaged value is an error, never notifications made up.
        #expect(throws: StoreFailure.self) { try PackedNotifications.decode(Array(packed.dropLast(3)), batch: batch) }
        #expect(throws: StoreFailure.self) { try PackedNotifications.decode([9] + packed.dropFirst(), batch: batch) }
        #expect(throws: StoreFailure.self) { try PackedNotifications.decode([], batch: batch) }
        #expect(throws: StoreFailure.self) { try PackedNotifications.decode(packed, batch: "not a batch id") }
    }

    @Test func aStoreOfSchemaVersion3IsMovedWithItsRowsStatesAndAnswers() async throws {
        let folder = try scratchFolder("store-v3")
        try Self.writeVersion3(at: folder + "/salvo.sqlite")
        let store = try await SQLiteNotificationStore.open(directory: folder)
        // Batch a: delivered (seq 1), being sent (2), queued (3); batch b: refused, with its webhook wish (4).
        let a = try await store.batch("aaaaaaaa-0000-4000-8000-000000000000")
        #expect(a.map(\.id) == (1...3).map { Self.legacyID($0) })
        #expect(a.map(\.state) == [.delivered, .sending, .queued])
        #expect(a[0].status == 200 && a[0].apnsID == "apple-1" && a[0].apnsUniqueID == "unique-1")
        #expect(a[0].sentAt == 1_100 && a[0].answeredAt == 1_200 && a[0].acceptedAt == 1_000)
        #expect(a[1].sentAt == 1_100 && a[1].answeredAt == nil && a[1].apnsID == Self.legacyID(2))
        #expect(a[2].sentAt == nil && a[2].uncertainResends == 1)
        #expect(a[0].token == Self.legacyToken(1).hexString)
        let b = try await store.notifications(ids: [Self.legacyID(4), "ffffffff-0000-4000-8000-000000000000"])
        #expect(b.count == 1)
        #expect(b.first?.batch == "bbbbbbbb-0000-4000-8000-000000000000")
        #expect(b.first?.state == .refused && b.first?.status == 410 && b.first?.reason == "Unregistered")
        #expect(b.first?.unregisteredAt == 900)
        // The row being sent is settled at the restart as any other (written: queued again, counted).
        let recovery = try await store.recover(onUncertain: .resend, now: 2_000, marks: nil)
        #expect(recovery.uncertain == 1 && recovery.depth == 2)
        // The queued rows are claimed first, their values as they were; the next row is numbered after them.
        var cycle = StoreCycle(now: 3_000)
        cycle.accepts = [NotificationStoreTests.accept([notification(9)])]
        cycle.claim = 10
        let result = try await store.write(cycle)
        #expect(result.claimed.map(\.seq) == [2, 3, 5])
        #expect(result.claimed.map(\.notification.id) == [Self.legacyID(2), Self.legacyID(3), notification(9).id])
        #expect(result.claimed[0].notification.headers.topic == "com.example.app")
        #expect(result.claimed[0].notification.headers.expiration == 1_900_000_000)
        #expect(result.claimed[0].acceptedAt == 1_000)
        #expect(result.claimed[1].notification.payload == Array(#"{"aps":{"alert":"legacy 3"}}"#.utf8))
        #expect(try await store.batch("aaaaaaaa-0000-4000-8000-000000000000").map(\.uncertainResends) == [0, 1, 1])
        await store.close()
        // Opened again, nothing moves twice.
        let again = try await SQLiteNotificationStore.open(directory: folder)
        #expect(
            try await again.batch("aaaaaaaa-0000-4000-8000-000000000000").map(\.state) == [
                .delivered, .sending, .sending,
            ]
        )
        await again.close()
    }

    static func legacyID(_ seq: Int) -> String { String(format: "0000000%d-0000-4000-8000-00000000000%d", seq, seq) }

    static func legacyToken(_ seq: Int) -> DeviceToken {
        try! DeviceToken(bytes: Array(repeating: UInt8(seq), count: 32))
    }

    /// A store as schema version 3 wrote it: its tables, and four notifications in two batches.
    static func writeVersion3(at path: String) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            for statement in Self.version3Tables { try db.execute(sql: statement) }
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('schema', '3')")
            // seq, batch, state, status, reason, apns_id, apns_unique_id, unregistered_at, sent_at, answered_at,
            // uncertain_resends, webhook
            let rows: [(Int, String, Int, Int?, String?, String?, String?, Int?, Int?, Int?, Int, Int)] = [
                (
                    1, "aaaaaaaa-0000-4000-8000-000000000000", 2, 200, nil, "apple-1", "unique-1", nil, 1_100, 1_200, 0,
                    0
                ),
                (2, "aaaaaaaa-0000-4000-8000-000000000000", 1, nil, nil, nil, nil, nil, 1_100, nil, 0, 0),
                (3, "aaaaaaaa-0000-4000-8000-000000000000", 0, nil, nil, nil, nil, nil, nil, nil, 1, 0),
                (4, "bbbbbbbb-0000-4000-8000-000000000000", 3, 410, "Unregistered", nil, nil, 900, 1_100, 1_200, 0, 1),
            ]
            for row in rows {
                try db.execute(
                    sql: """
                        INSERT INTO notifications (seq, id, batch, token, payload, push_type, apns_id, expiration,
                            priority, topic, collapse_id, state, status, reason, apns_unique_id, unregistered_at,
                            accepted_at, sent_at, answered_at, uncertain_resends, webhook)
                        VALUES (?, ?, ?, ?, ?, 'alert', ?, 1900000000, 10, 'com.example.app', NULL, ?, ?, ?, ?, ?,
                            1000, ?, ?, ?, ?)
                        """,
                    arguments: [
                        row.0, Self.legacyID(row.0), row.1, Data(Self.legacyToken(row.0).bytes),
                        Data(#"{"aps":{"alert":"legacy \#(row.0)"}}"#.utf8), row.5 ?? Self.legacyID(row.0), row.2,
                        row.3, row.4, row.6, row.7, row.8, row.9, row.10, row.11,
                    ]
                )
            }
        }
        try queue.close()
    }

    /// Schema version 3's tables, as versions 1 to 3 of the store made them.
    static let version3Tables =
        ["CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"] + SQLiteNotificationStore.version1
        + SQLiteNotificationStore.version2 + SQLiteNotificationStore.version3
}
