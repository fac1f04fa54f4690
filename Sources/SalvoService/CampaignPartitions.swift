/// The decisions of a campaign run by a fleet, as values with the time given (milliseconds since 1970): how an
/// audience is cut into partitions, which partition a worker claims, what share of the campaign's rate a claim
/// carries, which rows of a partition taken over may have been written to Apple, when a holder must stop for want of
/// a renewed lease, and when the campaign is done. The PostgreSQL store and `CampaignRunner` carry them out; the tests
/// drive them without a socket.
public enum CampaignPartitions {
    /// A partition of a campaign as the store keeps it.
    public enum State: Int16, Hashable, Sendable {
        /// No worker holds it: never run, or released before its end (a pause, a stop, a failure).
        case open = 0
        /// A worker holds it under a lease.
        case held = 1
        /// Its run ended with every row settled (or closed by a cancel): never claimed again.
        case done = 2
    }

    // MARK: Cutting

    /// The partitions' sizes for `rows` rows, `rowsPerPartition` each (the last one the rest).
    public static func sizes(rows: Int, rowsPerPartition: Int) -> [Int] {
        let size = max(1, rowsPerPartition)
        guard rows > 0 else { return [] }
        return stride(from: 0, to: rows, by: size).map { min(size, rows - $0) }
    }

    // MARK: Claiming

    /// What a claim looks at: a partition that is not done, as the store read it.
    public struct Slot: Hashable, Sendable {
        public var part: Int
        public var state: State
        public var leaseUntil: Int64?
        public var fence: Int64

        public init(part: Int, state: State, leaseUntil: Int64?, fence: Int64) {
            self.part = part
            self.state = state
            self.leaseUntil = leaseUntil
            self.fence = fence
        }
    }

    /// The partition a claim takes, with its new fence, and whether it takes it from a worker whose lease ran out.
    public struct Choice: Hashable, Sendable {
        public var part: Int
        public var fence: Int64
        public var takeover: Bool

        public init(part: Int, fence: Int64, takeover: Bool) {
            self.part = part
            self.fence = fence
            self.takeover = takeover
        }
    }

    /// Which partition a worker claims at `now`: the first whose holder's lease has run out (a takeover), else the
    /// first open one in order; nil when every partition not done is held under a live lease. A dead or stalled
    /// holder's partition goes first, so that its rows wait a lease and the claimer's current partition, not the rest
    /// of the campaign. The fence is one more than the partition's, so that its earlier holder's checkpoints and
    /// release are refused from here on.
    public static func choose(_ slots: [Slot], now: Int64) -> Choice? {
        let ordered = slots.sorted { $0.part < $1.part }
        if let expired = ordered.first(where: { $0.state == .held && ($0.leaseUntil ?? Int64.min) < now }) {
            return Choice(part: expired.part, fence: expired.fence + 1, takeover: true)
        }
        if let open = ordered.first(where: { $0.state == .open }) {
            return Choice(part: open.part, fence: open.fence + 1, takeover: false)
        }
        return nil
    }

    /// When the earliest live lease among `slots` runs out (when a waiting worker may take it over), nil when none is
    /// held.
    public static func nextExpiry(_ slots: [Slot], now: Int64) -> Int64? {
        slots.filter { $0.state == .held }.compactMap(\.leaseUntil).filter { $0 >= now }.min()
    }

    // MARK: Rate

    /// The rate (notifications per second) a new claim of a campaign paced at `rate` carries, so that the claims in
    /// flight together never exceed it: the campaign's rate shared evenly by the `workers` that take part in it (this
    /// one included), and never more than what the live claims (`held`, their shares) leave. nil when that is under
    /// one notification a second: the worker waits for a claim to end. A campaign without a rate: no share (nil
    /// rate), every claim unpaced.
    ///
    /// A claim's share is fixed for its partition's run, so a claim never takes a crumb: when less than half an even
    /// share is free (a dead worker's claim still holding its share until its lease ends, or the shares of a fleet
    /// that grew), it waits for a claim to end rather than run a partition at a few notifications a second.
    public static func share(rate: Int?, held: [Int], workers: Int) -> RateShare {
        guard let rate else { return .unpaced }
        let free = rate - held.reduce(0, +)
        let even = max(1, rate / max(1, workers))
        if free >= even { return .paced(even) }
        return free >= 1 && free * 2 >= even ? .paced(free) : .wait
    }

    public enum RateShare: Hashable, Sendable {
        /// The campaign has no rate.
        case unpaced
        /// The claim's rate.
        case paced(Int)
        /// The live claims hold the whole rate: claim nothing now.
        case wait
    }

    // MARK: Holding

    /// What a holder does when a checkpoint could not be committed (the database unreachable): goes on while its
    /// lease, as last renewed at `lastRenewed`, has more than `margin` left, and stops its job at once past that, so
    /// that it writes no row once another worker may take the partition over.
    public static func mustStop(lastRenewed: Int64, lease: Int64, margin: Int64, now: Int64) -> Bool {
        now >= lastRenewed + lease - margin
    }

    // MARK: Taking over

    /// The journal's byte for a row: none, written, or one of the four settled states (`RowState`).
    static let none: UInt8 = 0
    static let written: UInt8 = 1

    /// What a worker that takes a partition over starts from: the journal's row states as its last holder
    /// checkpointed them, with every row that holder may have written since marked written, so that the journal
    /// counts them uncertain (resent or reported as `--on-uncertain` says), as it counts the rows a killed `send`
    /// left written.
    public struct Takeover: Hashable, Sendable {
        /// One byte per line of the partition's file (the journal's state bytes past its header).
        public var states: [UInt8]
        /// Rows written in the checkpoint and not settled.
        public var writtenAtCheckpoint: Int
        /// Rows not handed out at the checkpoint that the holder may have written after it, marked written.
        public var writtenSince: Int
        /// The rows the taker inherits as uncertain.
        public var uncertain: Int { self.writtenAtCheckpoint + self.writtenSince }
    }

    /// The states a taker restores. The rows are handed out in the order of their lines, so the rows a holder may
    /// have written after its last checkpoint are the unsent ones after the furthest row it had handed out, as many as
    /// its share of the rate lets it write from the checkpoint to the end of its lease (it stops writing there,
    /// `mustStop`), and `burst` more (what its pacing lets go at once); an unpaced holder may have written every one.
    ///
    /// - Parameters:
    ///   - states: the checkpoint's bytes; nil when the holder never checkpointed (every row may have been written).
    ///   - rows: the partition file's line count with the line before the first (the state bytes' length).
    ///   - share: the holder's rate, nil unpaced.
    ///   - checkpointAt: when the checkpoint was taken; `leaseUntil`: when the holder's lease ran out.
    public static func takeover(
        states: [UInt8]?,
        lines: Int,
        headerLines: Int,
        share: Int?,
        checkpointAt: Int64?,
        leaseUntil: Int64,
        burst: Int
    ) -> Takeover {
        var bytes = states ?? []
        if bytes.count != lines { bytes = [UInt8](repeating: Self.none, count: lines) }
        let firstRow = headerLines + 1
        guard firstRow < lines else { return Takeover(states: bytes, writtenAtCheckpoint: 0, writtenSince: 0) }
        let writtenAtCheckpoint = bytes[firstRow...].count(where: { $0 == Self.written })
        let furthest = bytes.indices.last { $0 >= firstRow && bytes[$0] != Self.none } ?? (firstRow - 1)
        let allowed: Int
        if let share, let checkpointAt, states != nil {
            let milliseconds = max(0, leaseUntil - checkpointAt)
            allowed = Int((Int64(share) * milliseconds + 999) / 1000) + max(0, burst)
        } else {
            allowed = Int.max
        }
        var writtenSince = 0
        var line = furthest + 1
        while line < lines && writtenSince < allowed {
            if bytes[line] == Self.none {
                bytes[line] = Self.written
                writtenSince += 1
            }
            line += 1
        }
        return Takeover(states: bytes, writtenAtCheckpoint: writtenAtCheckpoint, writtenSince: writtenSince)
    }

    // MARK: The end

    /// Where a campaign's partitions stand, for a worker that finds none to claim.
    public enum Standing: Hashable, Sendable {
        /// Every partition is done: the campaign is finished.
        case done
        /// Others hold the rest under live leases: wait until this time at the latest (a lease's end) and claim again.
        case waiting(until: Int64?)
    }

    public static func standing(_ slots: [Slot], now: Int64) -> Standing {
        guard slots.contains(where: { $0.state != .done }) else { return .done }
        return .waiting(until: Self.nextExpiry(slots, now: now))
    }
}
