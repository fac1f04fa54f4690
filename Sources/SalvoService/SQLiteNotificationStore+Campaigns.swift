import Foundation
import GRDB

/// The campaigns' records in the store's own file, table `campaigns` (schema 2): each change one durable
/// transaction, like an API key's.
extension SQLiteNotificationStore: CampaignStore {
    private static let campaignColumns =
        "id, state, settings, created_by, created_at, send_at, started_at, ended_at, message"

    public func campaigns() async throws(StoreFailure) -> [CampaignRecord] {
        try await self.read("SELECT \(Self.campaignColumns) FROM campaigns ORDER BY seq", [], Self.campaign)
    }

    public func campaign(id: String) async throws(StoreFailure) -> CampaignRecord? {
        try await self.read("SELECT \(Self.campaignColumns) FROM campaigns WHERE id = ?", [id], Self.campaign).first
    }

    public func putCampaign(
        _ record: CampaignRecord,
        events: [WebhookEvent],
        routes: WebhookRoutes
    ) async throws(StoreFailure) {
        try await self.writing { db in
            let arguments: StatementArguments = [
                record.id, record.state, Data(record.settings), record.createdBy, record.createdAt, record.sendAt,
                record.startedAt, record.endedAt, record.message,
            ]
            try db.execute(
                sql: """
                    INSERT INTO campaigns (id, seq, state, settings, created_by, created_at, send_at, started_at, ended_at,
                        message)
                    VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM campaigns), ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET state = excluded.state, settings = excluded.settings,
                        send_at = excluded.send_at, started_at = excluded.started_at, ended_at = excluded.ended_at,
                        message = excluded.message
                    """,
                arguments: arguments
            )
            try Self.enqueue(events, routes: routes, db)
        }
    }

    private static func campaign(_ row: Row) -> CampaignRecord? {
        CampaignRecord(
            id: row["id"] ?? "",
            state: row["state"] ?? "",
            settings: Self.bytes(row, "settings"),
            createdBy: row["created_by"] ?? "",
            createdAt: row["created_at"] ?? 0,
            sendAt: row["send_at"] ?? 0,
            startedAt: row["started_at"],
            endedAt: row["ended_at"],
            message: row["message"]
        )
    }
}
