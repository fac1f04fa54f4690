import Foundation
import GRDB

/// The webhooks' outbox in the store's own file, table `webhook_outbox` (schema 3): an event's row per endpoint,
/// pending until acknowledged or given up on; `webhook_sources` records what each derivation of events last read.
extension SQLiteNotificationStore: WebhookOutbox {
    public func enqueue(
        _ events: [WebhookEvent],
        routes: WebhookRoutes,
        source: (name: String, signature: String)?
    ) async throws(StoreFailure) -> Int {
        let source = source.map { [$0.name, $0.signature] }
        return try await self.writing { db in
            let added = try Self.enqueue(events, routes: routes, db)
            if let source {
                try db.execute(
                    sql: """
                        INSERT INTO webhook_sources (source, signature) VALUES (?, ?)
                        ON CONFLICT (source) DO UPDATE SET signature = excluded.signature
                        """,
                    arguments: StatementArguments(source)
                )
            }
            return added
        }
    }

    public func derivedSignature(of source: String) async throws(StoreFailure) -> String? {
        try await self.read("SELECT signature FROM webhook_sources WHERE source = ?", [source]) {
            $0["signature"] as String?
        }.first
    }

    public func pendingEvents(endpoint: String, limit: Int) async throws(StoreFailure) -> [OutboxEntry] {
        try await self.read(
            """
            SELECT event_id, type, created_at, data, attempts FROM webhook_outbox
            WHERE endpoint = ? AND state = 0 ORDER BY seq LIMIT ?
            """,
            [endpoint, limit]
        ) {
            OutboxEntry(
                id: $0["event_id"] ?? "",
                type: $0["type"] ?? "",
                createdAt: $0["created_at"] ?? 0,
                data: Self.bytes($0, "data"),
                attempts: $0["attempts"] ?? 0
            )
        }
    }

    public func acknowledge(endpoint: String, ids: [String], now: Int64) async throws(StoreFailure) {
        guard !ids.isEmpty else { return }
        try await self.writing { db in
            let statement = try db.cachedStatement(
                sql:
                    "UPDATE webhook_outbox SET state = 1, ended_at = ? WHERE endpoint = ? AND event_id = ? AND state = 0"
            )
            for id in ids { try statement.execute(arguments: [now, endpoint, id]) }
        }
    }

    public func prune(endpoint: String, endedBefore: Int64) async throws(StoreFailure) -> Int {
        try await self.writing { db in
            try db.execute(
                sql: "DELETE FROM webhook_outbox WHERE endpoint = ? AND state <> 0 AND ended_at < ?",
                arguments: [endpoint, endedBefore]
            )
            return db.changesCount
        }
    }

    public func failed(endpoint: String, ids: [String], dead: [String], now: Int64) async throws(StoreFailure) {
        guard !ids.isEmpty else { return }
        try await self.writing { db in
            let count = try db.cachedStatement(
                sql: """
                    UPDATE webhook_outbox SET attempts = attempts + 1, last_attempt_at = ?
                    WHERE endpoint = ? AND event_id = ? AND state = 0
                    """
            )
            for id in ids { try count.execute(arguments: [now, endpoint, id]) }
            let bury = try db.cachedStatement(
                sql:
                    "UPDATE webhook_outbox SET state = 2, ended_at = ? WHERE endpoint = ? AND event_id = ? AND state = 0"
            )
            for id in dead { try bury.execute(arguments: [now, endpoint, id]) }
        }
    }

    public func pendingCount(endpoint: String) async throws(StoreFailure) -> Int {
        try await self.read("SELECT count(*) AS n FROM webhook_outbox WHERE endpoint = ? AND state = 0", [endpoint]) {
            $0["n"] as Int?
        }.first ?? 0
    }

    public func outboxCounts() async throws(StoreFailure) -> [String: OutboxCounts] {
        let rows = try await self.read(
            "SELECT endpoint, state, count(*) AS n FROM webhook_outbox GROUP BY endpoint, state",
            []
        ) { row -> (String, Int, Int)? in (row["endpoint"] ?? "", row["state"] ?? 0, row["n"] ?? 0) }
        return OutboxCounts.byEndpoint(rows)
    }
}
