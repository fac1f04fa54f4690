import NIOCore
import SQLiteNIO

/// The campaigns' records in the store's own file, table `campaigns` (schema 2): each change one durable
/// transaction, like an API key's.
extension SQLiteNotificationStore: CampaignStore {
    private static let campaignColumns =
        "id, state, settings, created_by, created_at, send_at, started_at, ended_at, message"

    public func campaigns() async throws(StoreFailure) -> [CampaignRecord] {
        try await self.read("SELECT \(Self.campaignColumns) FROM campaigns ORDER BY seq").map(Self.campaign)
    }

    public func campaign(id: String) async throws(StoreFailure) -> CampaignRecord? {
        try await self.read("SELECT \(Self.campaignColumns) FROM campaigns WHERE id = ?", [.text(id)]).first.map(
            Self.campaign
        )
    }

    public func putCampaign(_ record: CampaignRecord) async throws(StoreFailure) {
        func optional(_ value: Int64?) -> SQLiteData { value.map { .integer(Int($0)) } ?? .null }
        try await self.change(
            """
            INSERT INTO campaigns (id, seq, state, settings, created_by, created_at, send_at, started_at, ended_at,
                message)
            VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM campaigns), ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET state = excluded.state, settings = excluded.settings,
                send_at = excluded.send_at, started_at = excluded.started_at, ended_at = excluded.ended_at,
                message = excluded.message
            """,
            [
                .text(record.id), .text(record.state), .blob(ByteBuffer(bytes: record.settings)),
                .text(record.createdBy), .integer(Int(record.createdAt)), .integer(Int(record.sendAt)),
                optional(record.startedAt), optional(record.endedAt), record.message.map { .text($0) } ?? .null,
            ]
        )
    }

    private static func campaign(_ row: SQLiteRow) -> CampaignRecord {
        CampaignRecord(
            id: row.column("id")?.string ?? "",
            state: row.column("state")?.string ?? "",
            settings: Self.bytes(row.column("settings")),
            createdBy: row.column("created_by")?.string ?? "",
            createdAt: Int64(row.column("created_at")?.integer ?? 0),
            sendAt: Int64(row.column("send_at")?.integer ?? 0),
            startedAt: row.column("started_at")?.integer.map { Int64($0) },
            endedAt: row.column("ended_at")?.integer.map { Int64($0) },
            message: row.column("message")?.string
        )
    }
}
