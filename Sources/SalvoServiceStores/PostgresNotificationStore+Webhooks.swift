import NIOCore
import PostgresNIO
import SalvoService

/// The webhooks' outbox in the table `salvo.webhook_outbox`: an event's row per endpoint, pending until acknowledged
/// or given up on; `salvo.webhook_sources` records what each derivation of events last read.
extension PostgresNotificationStore: WebhookOutbox {
    public func enqueue(
        _ events: [WebhookEvent],
        routes: WebhookRoutes,
        source: (name: String, signature: String)?
    ) async throws(StoreFailure) -> Int {
        let source = source.map { [$0.name, $0.signature] }
        return try await self.transaction { connection in
            let added = try await PostgresCycle.enqueue(events, routes: routes, connection)
            if let source {
                try await connection.query(
                    """
                    INSERT INTO salvo.webhook_sources (source, signature) VALUES (\(source[0]), \(source[1]))
                    ON CONFLICT (source) DO UPDATE SET signature = excluded.signature
                    """,
                    logger: Self.logger
                )
            }
            return added
        }
    }

    public func derivedSignature(of source: String) async throws(StoreFailure) -> String? {
        try await self.read("SELECT signature FROM salvo.webhook_sources WHERE source = \(source)") {
            try $0.decode(String.self)
        }.first
    }

    public func pendingEvents(endpoint: String, limit: Int) async throws(StoreFailure) -> [OutboxEntry] {
        try await self.read(
            """
            SELECT event_id, type, created_at, data, attempts FROM salvo.webhook_outbox
            WHERE endpoint = \(endpoint) AND state = 0 ORDER BY seq LIMIT \(limit)
            """
        ) {
            let (id, type, createdAt, data, attempts) = try $0.decode((String, String, Int64, ByteBuffer, Int).self)
            return OutboxEntry(
                id: id,
                type: type,
                createdAt: createdAt,
                data: Array(data.readableBytesView),
                attempts: attempts
            )
        }
    }

    public func acknowledge(endpoint: String, ids: [String], now: Int64) async throws(StoreFailure) {
        guard !ids.isEmpty else { return }
        try await self.change(
            """
            UPDATE salvo.webhook_outbox SET state = 1, ended_at = \(now)
            WHERE endpoint = \(endpoint) AND event_id = ANY(\(ids)) AND state = 0
            """
        )
    }

    public func prune(endpoint: String, endedBefore: Int64) async throws(StoreFailure) -> Int {
        try await self.change(
            """
            DELETE FROM salvo.webhook_outbox WHERE endpoint = \(endpoint) AND state <> 0 AND ended_at < \(endedBefore)
            """
        )
    }

    public func failed(endpoint: String, ids: [String], dead: [String], now: Int64) async throws(StoreFailure) {
        guard !ids.isEmpty else { return }
        try await self.transaction { connection in
            try await connection.query(
                """
                UPDATE salvo.webhook_outbox SET attempts = attempts + 1, last_attempt_at = \(now)
                WHERE endpoint = \(endpoint) AND event_id = ANY(\(ids)) AND state = 0
                """,
                logger: Self.logger
            )
            if !dead.isEmpty {
                try await connection.query(
                    """
                    UPDATE salvo.webhook_outbox SET state = 2, ended_at = \(now)
                    WHERE endpoint = \(endpoint) AND event_id = ANY(\(dead)) AND state = 0
                    """,
                    logger: Self.logger
                )
            }
        }
    }

    public func pendingCount(endpoint: String) async throws(StoreFailure) -> Int {
        try await self.read(
            "SELECT count(*) FROM salvo.webhook_outbox WHERE endpoint = \(endpoint) AND state = 0"
        ) { try $0.decode(Int.self) }.first ?? 0
    }

    public func outboxCounts() async throws(StoreFailure) -> [String: OutboxCounts] {
        let rows = try await self.read(
            "SELECT endpoint, state, count(*) FROM salvo.webhook_outbox GROUP BY endpoint, state"
        ) { try $0.decode((String, Int, Int).self) }
        return OutboxCounts.byEndpoint(rows)
    }
}
