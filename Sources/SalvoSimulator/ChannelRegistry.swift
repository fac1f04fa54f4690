import APNSWire
import NIOConcurrencyHelpers

/// The simulator's channels and broadcast ledger, shared by the channel management endpoint and the broadcast
/// endpoint on every event loop: a `ChannelBook` and a `BroadcastBook` behind one lock (a broadcast is charged to
/// its channel's budget and recorded in one step). Read it from tests and at the end of a run: `snapshot()`,
/// `records()`, `verdict(expected:)`.
public final class ChannelRegistry: Sendable {
    /// A channel as the registry knows it.
    public struct ChannelInfo: Sendable, Hashable {
        public var id: String
        public var app: String
        public var policy: ChannelStoragePolicy
        /// UNIX seconds.
        public var createdAt: UInt32
        public var subscribers: Int
        public var deleted: Bool
    }

    /// What a channel management request did.
    enum Managed: Sendable, Equatable {
        case created(String)
        case read(ChannelStoragePolicy)
        case deleted
        case listed([String])
    }

    private struct State: Sendable {
        var channels: ChannelBook
        var broadcasts: BroadcastBook
        var counters = BroadcastSnapshot()
        /// Broadcast requests per channel so far, while the faults draw refusals (each draw keyed by its count).
        var attempts: [String: Int] = [:]
    }

    public let configuration: BroadcastConfiguration
    /// The faults in force (the plan's, or the configuration's).
    public let faults: BroadcastFaults
    private let seed: UInt64
    let clock: any SimulatorClock
    private let state: NIOLockedValueBox<State>

    init(
        configuration: BroadcastConfiguration,
        faults: BroadcastFaults,
        seed: UInt64,
        offlineFraction: Double,
        onlineAt: UInt32?,
        clock: any SimulatorClock
    ) {
        self.configuration = configuration
        self.faults = faults
        self.seed = seed
        self.clock = clock
        self.state = NIOLockedValueBox(
            State(
                channels: ChannelBook(seed: seed),
                broadcasts: BroadcastBook(offlineFraction: offlineFraction, onlineAt: onlineAt)
            )
        )
    }

    /// Carries out a checked channel management request.
    func perform(_ operation: ChannelRequestCheck.Operation) -> Result<Managed, APNSReason> {
        let now = self.clock.now()
        return self.state.withLockedValue { state in
            switch operation {
            case .create(let app, let policy):
                return state.channels.create(
                    app: app,
                    policy: policy,
                    subscribers: self.configuration.subscribers,
                    limit: self.configuration.channelLimit,
                    now: now
                ).map { .created($0.id) }
            case .read(let app, let id):
                guard let channel = state.channels.channel(id, app: app) else {
                    return .failure(BroadcastRules.channelNotRegistered)
                }
                return .success(.read(channel.policy))
            case .delete(let app, let id):
                return state.channels.delete(id, app: app)
                    ? .success(.deleted) : .failure(BroadcastRules.channelNotRegistered)
            case .list(let app):
                return .success(.listed(state.channels.list(app: app)))
            }
        }
    }

    /// The policy of `app`'s live channel `id`; nil when it has none.
    func policy(of id: String, app: String) -> ChannelStoragePolicy? {
        self.state.withLockedValue { $0.channels.channel(id, app: app)?.policy }
    }

    /// Charges a checked broadcast to its channel's budget and records it; TooManyRequests when the budget is spent,
    /// ChannelNotRegistered when the channel went meanwhile. The faults may refuse it first (429, 503), or answer it
    /// and lose it (accepted, nil: nothing recorded), or record it twice (`BroadcastFaults`).
    func accept(_ passed: BroadcastRequestCheck.Passed) -> Result<BroadcastRecord?, APNSReason> {
        let now = self.clock.now()
        return self.state.withLockedValue { state in
            guard let channel = state.channels.channel(passed.channelID, app: passed.app) else {
                return .failure(BroadcastRules.channelNotRegistered)
            }
            var lost = false
            var duplicated = false
            if self.faults != BroadcastFaults() {
                let attempt = state.attempts[passed.channelID, default: 0]
                state.attempts[passed.channelID] = attempt + 1
                switch self.faults.fate(channel: passed.channelID, attempt: attempt, seed: self.seed) {
                case .refuse(let reason):
                    return .failure(reason)
                case .accept(let lose, let repeats):
                    lost = lose
                    duplicated = repeats
                }
            }
            guard state.channels.charge(passed.channelID, budget: self.configuration.budget, now: now) else {
                return .failure(.tooManyRequests)
            }
            if lost {
                // Answered as accepted, charged, kept nowhere.
                state.counters.lostOnPurpose += 1
                return .success(nil)
            }
            var record = state.broadcasts.accept(passed, subscribers: channel.subscribers, now: now)
            Self.count(record, into: &state.counters)
            if duplicated {
                record = state.broadcasts.accept(passed, subscribers: channel.subscribers, now: now)
                Self.count(record, into: &state.counters)
                state.counters.duplicatedOnPurpose += 1
            }
            return .success(record)
        }
    }

    private static func count(_ record: BroadcastRecord, into counters: inout BroadcastSnapshot) {
        counters.broadcastsAccepted += 1
        counters.deliveredNow += record.deliveredNow
        counters.stored += record.stored
        counters.dropped += record.dropped
        if record.duplicate { counters.duplicates += 1 }
        if record.stale && !record.duplicate { counters.staleArrivals += 1 }
    }

    /// Counts a refused request by its reason.
    func countRefusal(_ reason: APNSReason, broadcast: Bool) {
        self.state.withLockedValue { state in
            if broadcast {
                state.counters.broadcastRefusals[reason.rawValue, default: 0] += 1
            } else {
                state.counters.channelRefusals[reason.rawValue, default: 0] += 1
            }
        }
    }

    // MARK: Reading

    /// The channel `id`, live or deleted.
    public func channel(_ id: String) -> ChannelInfo? {
        self.state.withLockedValue { state in
            let deleted = state.channels.deleted[id]
            guard let channel = state.channels.channels[id] ?? deleted else { return nil }
            return ChannelInfo(
                id: channel.id,
                app: channel.app,
                policy: channel.policy,
                createdAt: channel.createdAt,
                subscribers: channel.subscribers,
                deleted: deleted != nil
            )
        }
    }

    /// The live channels of `app`, oldest first.
    public func channels(app: String) -> [String] {
        self.state.withLockedValue { $0.channels.list(app: app) }
    }

    /// Sets how many simulated devices are subscribed to the live channel `id` (later broadcasts fan out to them);
    /// false when there is no such channel.
    @discardableResult
    public func setSubscribers(_ count: Int, channel id: String) -> Bool {
        self.state.withLockedValue { $0.channels.setSubscribers(count, channel: id) }
    }

    /// Every accepted broadcast, oldest first; only `channel`'s when given.
    public func records(channel: String? = nil) -> [BroadcastRecord] {
        self.state.withLockedValue { state in
            guard let channel else { return state.broadcasts.records }
            return state.broadcasts.records.filter { $0.channelID == channel }
        }
    }

    /// The counters now (stored broadcasts whose subscribers came online by now are counted as delivered later).
    public func snapshot() -> BroadcastSnapshot {
        let now = self.clock.now()
        return self.state.withLockedValue { state in
            state.broadcasts.advance(to: now)
            return Self.counters(state)
        }
    }

    /// Judges the broadcasts so far: with `expected` (channel id → distinct updates it should have), also which
    /// channels miss updates and which got broadcasts unexpectedly. Lists at most `listLimit` channels per category.
    public func verdict(expected: [String: Int]? = nil, listLimit: Int = 100) -> BroadcastVerdict {
        let now = self.clock.now()
        return self.state.withLockedValue { state in
            state.broadcasts.advance(to: now)
            return BroadcastVerdict.judge(
                book: state.broadcasts,
                channels: state.channels,
                snapshot: Self.counters(state),
                expected: expected,
                listLimit: listLimit
            )
        }
    }

    private static func counters(_ state: State) -> BroadcastSnapshot {
        var counters = state.counters
        counters.channelsCreated = state.channels.created
        counters.channelsLive = state.channels.channels.count
        counters.channelsDeleted = state.channels.deleted.count
        counters.deliveredLater = state.broadcasts.lines.values.reduce(0) { $0 + $1.deliveredLater }
        counters.expired = state.broadcasts.lines.values.reduce(0) { $0 + $1.expired }
        counters.superseded = state.broadcasts.lines.values.reduce(0) { $0 + $1.superseded }
        return counters
    }
}
