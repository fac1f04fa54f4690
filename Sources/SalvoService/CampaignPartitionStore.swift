/// A store shared by a fleet of workers keeps each campaign's audience cut into partitions, which any worker claims
/// under a lease, runs, checkpoints and releases (`CampaignPartitions` decides; the PostgreSQL store carries it out).
/// A store without it (the embedded one) runs each campaign as one job on the node that holds it.
public protocol CampaignPartitionStore: Sendable {
    /// Keeps a new campaign's partitions (called once per batch of them, in order, `template` with the first) and its
    /// template's text, before its record: a campaign recorded is one any worker can run.
    func putPartitions(
        campaign: String,
        template: [UInt8]?,
        partitions: [CampaignPartition]
    ) async throws(StoreFailure)

    /// Removes a campaign's partitions (a campaign that could not be recorded).
    func deletePartitions(campaign: String) async throws(StoreFailure)

    /// Whether the campaign's audience is kept in partitions, with the template's text kept with it.
    func partitioned(campaign: String) async throws(StoreFailure) -> CampaignPartitionSet?

    /// Claims a partition of the campaign for this worker (`CampaignPartitions.choose`, the rate shared by
    /// `CampaignPartitions.share`), under a lease to `now + lease`; nil when none can be claimed now (with where the
    /// partitions stand). The worker is counted among the campaign's workers until `now + lease`.
    func claimPartition(
        campaign: String,
        rate: Int?,
        now: Int64,
        lease: Int64
    ) async throws(StoreFailure) -> PartitionClaimResult

    /// Records the progress of a claimed partition and renews its lease to `now + lease`, if this worker still holds
    /// it under the claim's fence; false when it does not (it was taken over): the holder stops at once.
    func checkpointPartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        now: Int64,
        lease: Int64
    ) async throws(StoreFailure) -> Bool

    /// Releases a claimed partition with its last checkpoint and its run's files: `done` (every row settled, or closed
    /// by a cancel) or open again for any worker. False when this worker no longer held it.
    func releasePartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        files: PartitionFiles,
        done: Bool
    ) async throws(StoreFailure) -> Bool

    /// Every partition of the campaign with the files of its last run (in order of part).
    func partitionResults(campaign: String) async throws(StoreFailure) -> [PartitionResult]

    /// The reports of the campaign's partitions that have one (in order of part): what a campaign's status needs,
    /// read without the partitions' line maps and row files.
    func partitionReports(campaign: String) async throws(StoreFailure) -> [[UInt8]]
}

/// One partition as the campaign's creation keeps it: a CSV of its own (the audience's header, then its rows as they
/// were, in order) and the audience's line of each of its file's lines (8 bytes little-endian each).
public struct CampaignPartition: Hashable, Sendable {
    public var part: Int
    public var rows: Int
    public var audience: [UInt8]
    public var lines: [UInt8]

    public init(part: Int, rows: Int, audience: [UInt8], lines: [UInt8]) {
        self.part = part
        self.rows = rows
        self.audience = audience
        self.lines = lines
    }
}

/// What a partitioned campaign keeps beside its partitions.
public struct CampaignPartitionSet: Hashable, Sendable {
    public var partitions: Int
    public var template: [UInt8]?

    public init(partitions: Int, template: [UInt8]?) {
        self.partitions = partitions
        self.template = template
    }
}

/// A partition a worker holds: what it runs, and what its checkpoints and release name.
public struct PartitionClaim: Hashable, Sendable {
    public var campaign: String
    public var part: Int
    public var fence: Int64
    /// Taken from a worker whose lease ran out.
    public var takeover: Bool
    /// Its rate, nil unpaced.
    public var share: Int?
    public var audience: [UInt8]
    public var lines: [UInt8]
    /// The last checkpoint (of this worker's earlier claim or another's), nil when it never ran.
    public var checkpoint: PartitionCheckpoint?
    /// The rate of the claim it was taken from (a takeover), and when that claim's lease ran out.
    public var previousShare: Int?
    public var previousLeaseUntil: Int64?

    public init(
        campaign: String,
        part: Int,
        fence: Int64,
        takeover: Bool,
        share: Int?,
        audience: [UInt8],
        lines: [UInt8],
        checkpoint: PartitionCheckpoint?,
        previousShare: Int? = nil,
        previousLeaseUntil: Int64? = nil
    ) {
        self.campaign = campaign
        self.part = part
        self.fence = fence
        self.takeover = takeover
        self.share = share
        self.audience = audience
        self.lines = lines
        self.checkpoint = checkpoint
        self.previousShare = previousShare
        self.previousLeaseUntil = previousLeaseUntil
    }
}

public enum PartitionClaimResult: Hashable, Sendable {
    case claimed(PartitionClaim)
    /// Nothing to claim now.
    case nothing(CampaignPartitions.Standing)
}

/// A partition's progress: its journal's row states (one byte per line of its file) and refused rows' log, as the
/// holder's journal had them at `at`.
public struct PartitionCheckpoint: Hashable, Sendable {
    public var states: [UInt8]
    public var rejectsLog: [UInt8]
    public var at: Int64

    public init(states: [UInt8], rejectsLog: [UInt8], at: Int64) {
        self.states = states
        self.rejectsLog = rejectsLog
        self.at = at
    }
}

/// The files a partition's run wrote, in `send`'s formats (lines of the partition's file).
public struct PartitionFiles: Hashable, Sendable {
    public var report: [UInt8]?
    public var rejects: [UInt8]?
    public var unsettled: [UInt8]?
    public var unregistered: [UInt8]?

    public init(
        report: [UInt8]? = nil,
        rejects: [UInt8]? = nil,
        unsettled: [UInt8]? = nil,
        unregistered: [UInt8]? = nil
    ) {
        self.report = report
        self.rejects = rejects
        self.unsettled = unsettled
        self.unregistered = unregistered
    }
}

/// A partition as the campaign's results read it.
public struct PartitionResult: Hashable, Sendable {
    public var part: Int
    public var rows: Int
    public var state: CampaignPartitions.State
    public var worker: String?
    public var fence: Int64
    public var lines: [UInt8]
    public var files: PartitionFiles

    public init(
        part: Int,
        rows: Int,
        state: CampaignPartitions.State,
        worker: String?,
        fence: Int64,
        lines: [UInt8],
        files: PartitionFiles
    ) {
        self.part = part
        self.rows = rows
        self.state = state
        self.worker = worker
        self.fence = fence
        self.lines = lines
        self.files = files
    }
}
