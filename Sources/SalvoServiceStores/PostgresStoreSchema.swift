import Logging
import PostgresNIO
import SalvoService

/// The PostgreSQL store's tables, in the schema `salvo` of the database, and their versions: each version a list of
/// statements, applied in order by `migrate` (`salvo serve migrate`), each version once, recorded in
/// `salvo.schema_version`. The store itself never changes the schema: it refuses a database whose version is not the
/// one it knows (`check`), older ones with the advice to migrate.
public enum PostgresStoreSchema {
    /// The version this code reads and writes.
    public static var version: Int { Self.versions.count }

    /// Version 1: the notifications with their leases (`worker`, `lease_until`, `fence`), idempotency keys,
    /// templates, API keys, campaigns, the webhooks' outbox and its sources: what the SQLite store's three versions
    /// hold, with the columns a fleet needs. Version 2: campaigns' audiences in partitions
    /// (`campaignPartitions`). Version 3: those audiences stored uncompressed.
    static let versions: [[String]] = [
        [
            """
            CREATE TABLE salvo.notifications (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT NULL UNIQUE, batch text NOT NULL,
                token bytea NOT NULL, payload bytea NOT NULL, push_type text, apns_id text, expiration bigint,
                priority integer, topic text, collapse_id text, state smallint NOT NULL, status integer, reason text,
                apns_unique_id text, unregistered_at bigint, accepted_at bigint NOT NULL, sent_at bigint,
                answered_at bigint, uncertain_resends integer NOT NULL DEFAULT 0, webhook boolean NOT NULL DEFAULT false,
                worker text, lease_until bigint, fence bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX notifications_batch ON salvo.notifications (batch, seq)",
            // The rows to claim and the rows being sent, each by a partial index of its own, so that a claim walks
            // neither the delivered rows nor the other's.
            "CREATE INDEX notifications_queued ON salvo.notifications (seq) WHERE state = 0",
            "CREATE INDEX notifications_sending ON salvo.notifications (seq) WHERE state = 1",
            """
            CREATE TABLE salvo.idempotency (
                key_id text NOT NULL, key text NOT NULL, body_hash bytea NOT NULL, status integer NOT NULL,
                body bytea NOT NULL, created_at bigint NOT NULL, PRIMARY KEY (key_id, key))
            """,
            "CREATE INDEX idempotency_created ON salvo.idempotency (created_at)",
            "CREATE TABLE salvo.templates (name text PRIMARY KEY, body bytea NOT NULL, updated_at bigint NOT NULL)",
            """
            CREATE TABLE salvo.api_keys (
                id text PRIMARY KEY, name text NOT NULL, hash bytea NOT NULL UNIQUE, created_at bigint NOT NULL,
                revoked_at bigint)
            """,
            """
            CREATE TABLE salvo.campaigns (
                id text PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY, state text NOT NULL,
                settings bytea NOT NULL, created_by text NOT NULL, created_at bigint NOT NULL, send_at bigint NOT NULL,
                started_at bigint, ended_at bigint, message text)
            """,
            // One row per event and endpoint: `state` 0 pending, 1 delivered (acknowledged), 2 dead (given up on).
            """
            CREATE TABLE salvo.webhook_outbox (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, endpoint text NOT NULL, event_id text NOT NULL,
                type text NOT NULL, created_at bigint NOT NULL, data bytea NOT NULL, state smallint NOT NULL DEFAULT 0,
                attempts integer NOT NULL DEFAULT 0, last_attempt_at bigint, ended_at bigint,
                UNIQUE (endpoint, event_id))
            """,
            "CREATE INDEX webhook_outbox_pending ON salvo.webhook_outbox (endpoint, seq) WHERE state = 0",
            "CREATE TABLE salvo.webhook_sources (source text PRIMARY KEY, signature text NOT NULL)",
            "CREATE TABLE salvo.meta (key text PRIMARY KEY, value text NOT NULL)",
        ],
        PostgresStoreSchema.campaignPartitions,
        // Version 3: a partition's audience, a CSV of hex tokens that does not compress, is stored as it is rather
        // than tried for compression at every insert (most of the time of cutting an audience into partitions).
        ["ALTER TABLE salvo.campaign_partitions ALTER COLUMN audience SET STORAGE EXTERNAL"],
    ]

    /// What `migrate` did: the version found and the version left.
    public struct Migration: Hashable, Sendable {
        public var from: Int
        public var to: Int
    }

    /// The advisory lock every migration holds (its transaction's): two workers migrating at once take turns, and
    /// the second finds the work done.
    static let lockKey: Int64 = 0x5341_4C56_4F53_4348  // "SALVOSCH"

    /// Brings the database's schema to `version`, in one transaction under the advisory lock: the missing versions'
    /// statements in order, each recorded. Running it again changes nothing.
    ///
    /// - Throws: `StoreFailure` for a schema newer than this code knows (left as it is), or the server's refusal.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> Migration {
        try await connection.query("BEGIN", logger: logger)
        do {
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
            try await connection.query("CREATE SCHEMA IF NOT EXISTS salvo", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS salvo.schema_version (
                    version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """,
                logger: logger
            )
            let found = try await Self.currentVersion(connection, logger: logger) ?? 0
            guard found <= Self.version else { throw Self.newer(found) }
            for version in Self.versions.indices.map({ $0 + 1 }) where version > found {
                for statement in Self.versions[version - 1] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO salvo.schema_version (version) VALUES (\(version))",
                    logger: logger
                )
            }
            try await connection.query("COMMIT", logger: logger)
            return Migration(from: found, to: Self.version)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Refuses a database whose schema is not the one this code knows.
    ///
    /// - Throws: `StoreFailure`: no schema or an older one (run `salvo serve migrate`), or a newer one.
    static func check(_ connection: PostgresConnection, logger: Logger) async throws {
        let exists = try await connection.query(
            "SELECT to_regclass('salvo.schema_version') IS NOT NULL",
            logger: logger
        )
        var present = false
        for try await row in exists { present = try row.decode(Bool.self) }
        let found = present ? try await Self.currentVersion(connection, logger: logger) ?? 0 : 0
        guard found <= Self.version else { throw Self.newer(found) }
        guard found == Self.version else {
            throw StoreFailure(
                found == 0
                    ? "the database has no Salvo store yet: run `salvo serve migrate --store URL` first"
                    : "the store's schema is version \(found), older than this salvo's (\(Self.version)): run "
                        + "`salvo serve migrate --store URL` first"
            )
        }
    }

    private static func currentVersion(_ connection: PostgresConnection, logger: Logger) async throws -> Int? {
        let rows = try await connection.query("SELECT max(version) FROM salvo.schema_version", logger: logger)
        var version: Int?
        for try await row in rows { version = try row.decode(Int?.self) }
        return version
    }

    private static func newer(_ found: Int) -> StoreFailure {
        StoreFailure(
            "the store's schema is version \(found), newer than this salvo's (\(Self.version)): run a newer salvo"
        )
    }
}
