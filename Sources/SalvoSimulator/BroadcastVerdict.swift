/// One accepted broadcast in the ledger: its channel, its update, when, and its fan-out under the channel's policy.
public struct BroadcastRecord: Sendable, Hashable, Codable {
    public var channelID: String
    /// Its place among every broadcast accepted (0 first).
    public var sequence: Int
    /// When it was accepted, UNIX seconds of the simulator's clock.
    public var acceptedAt: UInt32
    /// `aps.timestamp` and `aps.event`.
    public var timestamp: Int64
    public var event: String
    /// The payload's bytes, hashed; and the update (the payload without `aps.timestamp`), hashed.
    public var payloadDigest: UInt64
    public var updateDigest: UInt64
    public var priority: UInt8
    public var expiration: UInt32
    public var policy: ChannelStoragePolicy
    /// Subscribers it reached at once; offline subscribers it is stored for; offline subscribers that miss it.
    public var deliveredNow: Int
    public var stored: Int
    public var dropped: Int
    /// The channel had accepted this update already.
    public var duplicate: Bool
    /// No newer than what the channel's subscribers show: not displayed.
    public var stale: Bool
}

/// The broadcast side's counters at one moment.
public struct BroadcastSnapshot: Sendable, Equatable, Codable {
    public var channelsCreated = 0
    public var channelsLive = 0
    public var channelsDeleted = 0
    public var broadcastsAccepted = 0
    /// Refusals by reason (`BadExpirationDate`, `TooManyRequests`, …), of broadcasts and of channel requests.
    public var broadcastRefusals: [String: Int] = [:]
    public var channelRefusals: [String: Int] = [:]
    /// Fan-out: deliveries at once, stored for offline subscribers, delivered when they came online, missed (No
    /// Message Stored, or expiration 0), stored but expired first.
    public var deliveredNow = 0
    public var stored = 0
    public var deliveredLater = 0
    public var dropped = 0
    public var expired = 0
    /// Stored, then superseded by a newer stored message before the subscribers came online.
    public var superseded = 0
    /// Broadcasts repeating an update their channel had; arrivals older than what the subscribers showed.
    public var duplicates = 0
    public var staleArrivals = 0
    /// Broadcasts the faults answered and lost, and recorded twice (`BroadcastFaults`).
    public var lostOnPurpose = 0
    public var duplicatedOnPurpose = 0

    public init() {}
}

/// The simulator's judgement of broadcasts: each channel got each update exactly once, and what its subscribers show
/// (the latest `aps.timestamp` wins; an older update arriving later replaces nothing).
///
/// With an expectation (channel id → how many distinct updates it should have), channels short of it are *missing*
/// updates and channels not in it that got broadcasts are *unexpected*; without one, only duplicates fail.
public struct BroadcastVerdict: Sendable, Equatable, Codable {
    /// One channel's line.
    public struct Channel: Sendable, Equatable, Codable {
        public var channelID: String
        public var app: String?
        public var policy: ChannelStoragePolicy?
        public var subscribers: Int
        public var deleted: Bool
        public var broadcasts: Int
        public var distinctUpdates: Int
        public var duplicates: Int
        public var expectedUpdates: Int?
        /// The latest `aps.timestamp` its subscribers show, and how many older updates arrived after a newer one.
        public var shownTimestamp: Int64?
        public var staleArrivals: Int
        public var deliveredNow: Int
        public var deliveredLater: Int
        public var dropped: Int
    }

    public var channels: Int
    public var broadcastsAccepted: Int
    public var distinctUpdates: Int
    public var duplicates: Int
    public var channelsWithDuplicates: Int
    /// Expected channels with fewer distinct updates than expected, and channels with broadcasts not expected.
    public var channelsMissingUpdates: Int
    public var unexpectedChannels: Int
    public var staleArrivals: Int
    public var listLimit: Int
    /// The first `listLimit` channels of each failing category, then the first `listLimit` of all.
    public var duplicateChannelIDs: [String] = []
    public var missingChannelIDs: [String] = []
    public var unexpectedChannelIDs: [String] = []
    public var lines: [Channel] = []
    public var ledger: BroadcastSnapshot

    /// Every channel got each of its updates exactly once (and, with an expectation, as many as expected, and no
    /// channel outside it got any).
    public var passed: Bool {
        self.duplicates == 0 && self.channelsMissingUpdates == 0 && self.unexpectedChannels == 0
    }

    public var summary: String {
        [
            "broadcast verdict: \(self.passed ? "PASS" : "FAIL") — \(self.channels) channels",
            "  broadcasts accepted:        \(self.broadcastsAccepted)",
            "  distinct updates:           \(self.distinctUpdates)",
            "  duplicates:                 \(self.duplicates) (on \(self.channelsWithDuplicates) channels)",
            "  channels missing updates:   \(self.channelsMissingUpdates)",
            "  unexpected channels:        \(self.unexpectedChannels)",
            "  stale arrivals (not shown): \(self.staleArrivals)",
            "  fan-out: \(self.ledger.deliveredNow) at once, \(self.ledger.deliveredLater) later, "
                + "\(self.ledger.stored - self.ledger.superseded - self.ledger.deliveredLater - self.ledger.expired) "
                + "still stored, "
                + "\(self.ledger.dropped) missed, \(self.ledger.expired) expired",
        ].joined(separator: "\n")
    }

    static func judge(
        book: BroadcastBook,
        channels: ChannelBook,
        snapshot: BroadcastSnapshot,
        expected: [String: Int]?,
        listLimit: Int
    ) -> BroadcastVerdict {
        var verdict = BroadcastVerdict(
            channels: 0,
            broadcastsAccepted: book.records.count,
            distinctUpdates: 0,
            duplicates: 0,
            channelsWithDuplicates: 0,
            channelsMissingUpdates: 0,
            unexpectedChannels: 0,
            staleArrivals: 0,
            listLimit: listLimit,
            ledger: snapshot
        )
        // Every channel that got a broadcast or was expected, in a stable order.
        let ids = Set(book.lines.keys).union(expected?.keys ?? [:].keys).sorted()
        verdict.channels = ids.count
        for id in ids {
            let line = book.lines[id] ?? BroadcastBook.Line()
            let channel = channels.channels[id] ?? channels.deleted[id]
            let want = expected?[id]
            verdict.distinctUpdates += line.updates.count
            verdict.duplicates += line.duplicates
            verdict.staleArrivals += line.staleArrivals
            if line.duplicates > 0 {
                verdict.channelsWithDuplicates += 1
                if verdict.duplicateChannelIDs.count < listLimit { verdict.duplicateChannelIDs.append(id) }
            }
            if let want, line.updates.count < want {
                verdict.channelsMissingUpdates += 1
                if verdict.missingChannelIDs.count < listLimit { verdict.missingChannelIDs.append(id) }
            }
            if expected != nil, want == nil, line.accepted > 0 {
                verdict.unexpectedChannels += 1
                if verdict.unexpectedChannelIDs.count < listLimit { verdict.unexpectedChannelIDs.append(id) }
            }
            guard verdict.lines.count < listLimit else { continue }
            verdict.lines.append(
                Channel(
                    channelID: id,
                    app: channel?.app,
                    policy: channel?.policy,
                    subscribers: channel?.subscribers ?? 0,
                    deleted: channels.deleted[id] != nil,
                    broadcasts: line.accepted,
                    distinctUpdates: line.updates.count,
                    duplicates: line.duplicates,
                    expectedUpdates: want,
                    shownTimestamp: line.shownTimestamp,
                    staleArrivals: line.staleArrivals,
                    deliveredNow: line.deliveredNow,
                    deliveredLater: line.deliveredLater,
                    dropped: line.dropped
                )
            )
        }
        return verdict
    }
}
