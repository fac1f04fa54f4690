extension PostgresStoreSchema {
    /// Version 2: a campaign's audience cut into partitions that the fleet's workers claim (`CampaignPartitions`).
    /// `campaign_partition_sets` says a campaign is partitioned and keeps its template's text; each row of
    /// `campaign_partitions` is a partition's CSV (`audience`) with the audience's line of each of its lines
    /// (`lines`), its state (0 open, 1 held, 2 done), its holder's lease (`worker`, `lease_until`, `fence`, one more
    /// at every claim) and rate (`rate_share`), its last checkpoint (`states`, the journal's byte per line;
    /// `rejects_log`; `checkpoint_at`) and the files of its last run; `campaign_workers` counts the workers taking part
    /// in a campaign (until `seen_until`), among whom its rate is shared.
    static let campaignPartitions: [String] = [
        """
        CREATE TABLE salvo.campaign_partition_sets (
            campaign text PRIMARY KEY, partitions integer NOT NULL, template bytea)
        """,
        """
        CREATE TABLE salvo.campaign_partitions (
            campaign text NOT NULL, part integer NOT NULL, rows integer NOT NULL, audience bytea NOT NULL,
            lines bytea NOT NULL, state smallint NOT NULL DEFAULT 0, worker text, lease_until bigint,
            fence bigint NOT NULL DEFAULT 0, rate_share integer, states bytea, rejects_log bytea, checkpoint_at bigint,
            report bytea, rejects bytea, unsettled bytea, unregistered bytea,
            PRIMARY KEY (campaign, part))
        """,
        """
        CREATE TABLE salvo.campaign_workers (
            campaign text NOT NULL, worker text NOT NULL, seen_until bigint NOT NULL, PRIMARY KEY (campaign, worker))
        """,
    ]
}
