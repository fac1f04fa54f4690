import NIOCore
import PostgresNIO
import SalvoService

/// The campaigns' records in the table `salvo.campaigns`: each change one transaction, with its webhook events.
extension PostgresNotificationStore: CampaignStore {
    private static let campaignColumns =
        "id, state, settings, created_by, created_at, send_at, started_at, ended_at, message"

    public func campaigns() async throws(StoreFailure) -> [CampaignRecord] {
        try await self.read(
            PostgresQuery(unsafeSQL: "SELECT \(Self.campaignColumns) FROM salvo.campaigns ORDER BY seq"),
            Self.campaign
        )
    }

    public func campaign(id: String) async throws(StoreFailure) -> CampaignRecord? {
        var binds = PostgresBindings()
        binds.append(id)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: "SELECT \(Self.campaignColumns) FROM salvo.campaigns WHERE id = $1",
                binds: binds
            ),
            Self.campaign
        ).first
    }

    public func putCampaign(
        _ record: CampaignRecord,
        events: [WebhookEvent],
        routes: WebhookRoutes
    ) async throws(StoreFailure) {
        let settings = ByteBuffer(bytes: record.settings)
        try await self.transaction { connection in
            try await connection.query(
                """
                INSERT INTO salvo.campaigns (id, state, settings, created_by, created_at, send_at, started_at,
                    ended_at, message)
                VALUES (\(record.id), \(record.state), \(settings), \(record.createdBy), \(record.createdAt),
                    \(record.sendAt), \(record.startedAt), \(record.endedAt), \(record.message))
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, settings = excluded.settings,
                    send_at = excluded.send_at, started_at = excluded.started_at, ended_at = excluded.ended_at,
                    message = excluded.message
                """,
                logger: Self.logger
            )
            try await PostgresCycle.enqueue(events, routes: routes, connection)
        }
    }

    private static func campaign(_ row: PostgresRow) throws -> CampaignRecord {
        let (id, state, settings, createdBy, createdAt, sendAt, startedAt, endedAt, message) = try row.decode(
            (String, String, ByteBuffer, String, Int64, Int64, Int64?, Int64?, String?).self
        )
        return CampaignRecord(
            id: id,
            state: state,
            settings: Array(settings.readableBytesView),
            createdBy: createdBy,
            createdAt: createdAt,
            sendAt: sendAt,
            startedAt: startedAt,
            endedAt: endedAt,
            message: message
        )
    }
}
