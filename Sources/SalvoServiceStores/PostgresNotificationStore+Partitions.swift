import NIOCore
import PostgresNIO
import SalvoService

/// Campaigns' partitions in `salvo.campaign_partitions` (schema version 2): any worker of the fleet claims one with
/// `FOR UPDATE SKIP LOCKED` under a lease, checkpoints it and releases it, each step fenced by the claim's token; the
/// choices are `CampaignPartitions`' values. A campaign's claims take turns on its `campaign_partition_sets` row, so
/// that the shares of its rate they carry are read and taken in one step and never add up past the rate.
extension PostgresNotificationStore: CampaignPartitionStore {
    public func putPartitions(
        campaign: String,
        template: [UInt8]?,
        partitions: [CampaignPartition]
    ) async throws(StoreFailure) {
        let templateBytes = template.map { ByteBuffer(bytes: $0) }
        try await self.transaction { connection in
            try await connection.query(
                """
                INSERT INTO salvo.campaign_partition_sets (campaign, partitions, template)
                VALUES (\(campaign), \(partitions.count), \(templateBytes))
                ON CONFLICT (campaign) DO UPDATE SET partitions = salvo.campaign_partition_sets.partitions
                    + excluded.partitions
                """,
                logger: Self.logger
            )
            for partition in partitions {
                let audience = ByteBuffer(bytes: partition.audience)
                let lines = ByteBuffer(bytes: partition.lines)
                try await connection.query(
                    """
                    INSERT INTO salvo.campaign_partitions (campaign, part, rows, audience, lines)
                    VALUES (\(campaign), \(partition.part), \(partition.rows), \(audience), \(lines))
                    """,
                    logger: Self.logger
                )
            }
        }
    }

    public func deletePartitions(campaign: String) async throws(StoreFailure) {
        try await self.transaction { connection in
            try await connection.query(
                "DELETE FROM salvo.campaign_partitions WHERE campaign = \(campaign)",
                logger: Self.logger
            )
            try await connection.query(
                "DELETE FROM salvo.campaign_workers WHERE campaign = \(campaign)",
                logger: Self.logger
            )
            try await connection.query(
                "DELETE FROM salvo.campaign_partition_sets WHERE campaign = \(campaign)",
                logger: Self.logger
            )
        }
    }

    public func partitioned(campaign: String) async throws(StoreFailure) -> CampaignPartitionSet? {
        var binds = PostgresBindings()
        binds.append(campaign)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: "SELECT partitions, template FROM salvo.campaign_partition_sets WHERE campaign = $1",
                binds: binds
            )
        ) { row in
            let (partitions, template) = try row.decode((Int, ByteBuffer?).self)
            return CampaignPartitionSet(partitions: partitions, template: template.map { Array($0.readableBytesView) })
        }.first
    }

    public func claimPartition(
        campaign: String,
        rate: Int?,
        now: Int64,
        lease: Int64
    ) async throws(StoreFailure) -> PartitionClaimResult {
        let worker = self.options.workerID
        let until = now + lease
        return try await self.transaction { connection -> PartitionClaimResult in
            // The campaign's claims take turns here.
            var exists = false
            for try await _ in try await connection.query(
                "SELECT 1 FROM salvo.campaign_partition_sets WHERE campaign = \(campaign) FOR UPDATE",
                logger: Self.logger
            ) { exists = true }
            guard exists else { return .nothing(.done) }
            try await connection.query(
                """
                INSERT INTO salvo.campaign_workers (campaign, worker, seen_until) VALUES (\(campaign), \(worker), \(until))
                ON CONFLICT (campaign, worker) DO UPDATE SET seen_until = excluded.seen_until
                """,
                logger: Self.logger
            )
            var free: [CampaignPartitions.Slot] = []
            var previous: [Int: (share: Int?, leaseUntil: Int64?)] = [:]
            for try await row in try await connection.query(
                """
                SELECT part, state, lease_until, fence, rate_share FROM salvo.campaign_partitions
                WHERE campaign = \(campaign) AND state < 2 ORDER BY part FOR UPDATE SKIP LOCKED
                """,
                logger: Self.logger
            ) {
                let (part, state, leaseUntil, fence, share) = try row.decode((Int, Int16, Int64?, Int64, Int?).self)
                free.append(
                    CampaignPartitions.Slot(
                        part: part,
                        state: CampaignPartitions.State(rawValue: state) ?? .open,
                        leaseUntil: leaseUntil,
                        fence: fence
                    )
                )
                previous[part] = (share, leaseUntil)
            }
            guard let choice = CampaignPartitions.choose(free, now: now) else {
                return .nothing(CampaignPartitions.standing(try await Self.slots(campaign, connection), now: now))
            }
            var held: [Int] = []
            for try await row in try await connection.query(
                """
                SELECT rate_share FROM salvo.campaign_partitions WHERE campaign = \(campaign) AND state = 1
                    AND lease_until >= \(now) AND rate_share IS NOT NULL
                """,
                logger: Self.logger
            ) { held.append(try row.decode(Int.self)) }
            var workers = 1
            for try await row in try await connection.query(
                "SELECT count(*) FROM salvo.campaign_workers WHERE campaign = \(campaign) AND seen_until >= \(now)",
                logger: Self.logger
            ) { workers = max(1, try row.decode(Int.self)) }
            let share: Int?
            switch CampaignPartitions.share(rate: rate, held: held, workers: workers) {
            case .unpaced: share = nil
            case .paced(let value): share = value
            case .wait:
                return .nothing(
                    .waiting(until: CampaignPartitions.nextExpiry(free, now: now).map { min($0, now + 1000) })
                )
            }
            var claim: PartitionClaim?
            for try await row in try await connection.query(
                """
                UPDATE salvo.campaign_partitions SET state = 1, worker = \(worker), lease_until = \(until),
                    fence = \(choice.fence), rate_share = \(share)
                WHERE campaign = \(campaign) AND part = \(choice.part)
                RETURNING audience, lines, states, rejects_log, checkpoint_at
                """,
                logger: Self.logger
            ) {
                let (audience, lines, states, rejectsLog, checkpointAt) = try row.decode(
                    (ByteBuffer, ByteBuffer, ByteBuffer?, ByteBuffer?, Int64?).self
                )
                let checkpoint = states.map { states in
                    PartitionCheckpoint(
                        states: Array(states.readableBytesView),
                        rejectsLog: rejectsLog.map { Array($0.readableBytesView) } ?? [],
                        at: checkpointAt ?? 0
                    )
                }
                claim = PartitionClaim(
                    campaign: campaign,
                    part: choice.part,
                    fence: choice.fence,
                    takeover: choice.takeover,
                    share: share,
                    audience: Array(audience.readableBytesView),
                    lines: Array(lines.readableBytesView),
                    checkpoint: checkpoint,
                    previousShare: choice.takeover ? previous[choice.part]?.share : nil,
                    previousLeaseUntil: choice.takeover ? previous[choice.part]?.leaseUntil : nil
                )
            }
            guard let claim else { return .nothing(.waiting(until: nil)) }
            return .claimed(claim)
        }
    }

    /// Every partition of the campaign not done, read without a lock (where they stand).
    private static func slots(
        _ campaign: String,
        _ connection: PostgresConnection
    ) async throws -> [CampaignPartitions.Slot] {
        var slots: [CampaignPartitions.Slot] = []
        for try await row in try await connection.query(
            """
            SELECT part, state, lease_until, fence FROM salvo.campaign_partitions
            WHERE campaign = \(campaign) AND state < 2
            """,
            logger: Self.logger
        ) {
            let (part, state, leaseUntil, fence) = try row.decode((Int, Int16, Int64?, Int64).self)
            slots.append(
                CampaignPartitions.Slot(
                    part: part,
                    state: CampaignPartitions.State(rawValue: state) ?? .open,
                    leaseUntil: leaseUntil,
                    fence: fence
                )
            )
        }
        return slots
    }

    public func checkpointPartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        now: Int64,
        lease: Int64
    ) async throws(StoreFailure) -> Bool {
        let worker = self.options.workerID
        let states = ByteBuffer(bytes: checkpoint.states)
        let log = ByteBuffer(bytes: checkpoint.rejectsLog)
        let until = now + lease
        return try await self.transaction { connection -> Bool in
            let changed =
                try await connection.query(
                    """
                    UPDATE salvo.campaign_partitions SET states = \(states), rejects_log = \(log),
                        checkpoint_at = \(checkpoint.at), lease_until = \(until)
                    WHERE campaign = \(claim.campaign) AND part = \(claim.part) AND state = 1 AND worker = \(worker)
                        AND fence = \(claim.fence)
                    """,
                    logger: Self.logger
                ).get().metadata.rows ?? 0
            guard changed == 1 else { return false }
            try await connection.query(
                """
                UPDATE salvo.campaign_workers SET seen_until = \(until)
                WHERE campaign = \(claim.campaign) AND worker = \(worker)
                """,
                logger: Self.logger
            )
            return true
        }
    }

    public func releasePartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        files: PartitionFiles,
        done: Bool
    ) async throws(StoreFailure) -> Bool {
        let worker = self.options.workerID
        let states = ByteBuffer(bytes: checkpoint.states)
        let log = ByteBuffer(bytes: checkpoint.rejectsLog)
        let report = files.report.map { ByteBuffer(bytes: $0) }
        let rejects = files.rejects.map { ByteBuffer(bytes: $0) }
        let unsettled = files.unsettled.map { ByteBuffer(bytes: $0) }
        let unregistered = files.unregistered.map { ByteBuffer(bytes: $0) }
        let state = done ? CampaignPartitions.State.done.rawValue : CampaignPartitions.State.open.rawValue
        let changed = try await self.change(
            """
            UPDATE salvo.campaign_partitions SET state = \(state), lease_until = NULL, rate_share = NULL,
                states = \(states), rejects_log = \(log), checkpoint_at = \(checkpoint.at),
                report = coalesce(\(report), report), rejects = coalesce(\(rejects), rejects),
                unsettled = coalesce(\(unsettled), unsettled), unregistered = coalesce(\(unregistered), unregistered)
            WHERE campaign = \(claim.campaign) AND part = \(claim.part) AND state = 1 AND worker = \(worker)
                AND fence = \(claim.fence)
            """
        )
        return changed == 1
    }

    public func partitionReports(campaign: String) async throws(StoreFailure) -> [[UInt8]] {
        var binds = PostgresBindings()
        binds.append(campaign)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: """
                    SELECT report FROM salvo.campaign_partitions
                    WHERE campaign = $1 AND report IS NOT NULL ORDER BY part
                    """,
                binds: binds
            )
        ) { row in Array(try row.decode(ByteBuffer.self).readableBytesView) }
    }

    public func partitionResults(campaign: String) async throws(StoreFailure) -> [PartitionResult] {
        var binds = PostgresBindings()
        binds.append(campaign)
        return try await self.read(
            PostgresQuery(
                unsafeSQL: """
                    SELECT part, rows, state, worker, fence, lines, report, rejects, unsettled, unregistered
                    FROM salvo.campaign_partitions WHERE campaign = $1 ORDER BY part
                    """,
                binds: binds
            )
        ) { row in
            let (part, rows, state, worker, fence, lines, report, rejects, unsettled, unregistered) = try row.decode(
                (
                    Int, Int, Int16, String?, Int64, ByteBuffer, ByteBuffer?,
                    ByteBuffer?, ByteBuffer?, ByteBuffer?
                ).self
            )
            func bytes(_ buffer: ByteBuffer?) -> [UInt8]? { buffer.map { Array($0.readableBytesView) } }
            return PartitionResult(
                part: part,
                rows: rows,
                state: CampaignPartitions.State(rawValue: state) ?? .open,
                worker: worker,
                fence: fence,
                lines: Array(lines.readableBytesView),
                files: PartitionFiles(
                    report: bytes(report),
                    rejects: bytes(rejects),
                    unsettled: bytes(unsettled),
                    unregistered: bytes(unregistered)
                )
            )
        }
    }
}
