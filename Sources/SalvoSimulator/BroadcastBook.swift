/// Every accepted broadcast, per channel, with its fan-out to the channel's simulated subscribers, and what those
/// subscribers show: a value, events in with their time (`ChannelRegistry` keeps it behind a lock).
///
/// Subscribers: a channel's `offlineFraction` of them (rounded) are offline until `onlineAt` (never, when nil), the
/// rest online. A broadcast reaches the online ones at once. For the offline ones a Most Recent Message Stored
/// channel keeps the newest broadcast (a newer one replaces it) until they come online, unless its expiration was 0
/// (one attempt, nothing stored), its expiration passed, or it waited longer than 8 hours; a No Message Stored channel
/// keeps nothing, so they miss it.
///
/// What a subscriber shows follows Live Activity rules: the update with the latest `aps.timestamp` wins, and an older
/// update arriving later does not replace it (counted as a stale arrival). An update is its payload without
/// `aps.timestamp` (`BroadcastRequestCheck.Update.updateDigest`): the same update accepted twice on a channel is a
/// duplicate.
struct BroadcastBook: Sendable {
    typealias Record = BroadcastRecord

    /// One channel's side of the ledger.
    struct Line: Sendable {
        var accepted = 0
        /// Updates by digest: how many times each was accepted.
        var updates: [UInt64: Int] = [:]
        var duplicates = 0
        var staleArrivals = 0
        /// What the online subscribers show: the latest timestamp, and its update.
        var shownTimestamp: Int64?
        var shownUpdate: UInt64?
        /// The message a Most Recent Message Stored channel keeps for its offline subscribers.
        var storedMessage: (update: UInt64, timestamp: Int64, validThrough: UInt32, subscribers: Int)?
        var deliveredNow = 0
        var deliveredLater = 0
        var dropped = 0
        var expired = 0
        /// Stored for offline subscribers, then superseded by a newer stored message before they came online.
        var superseded = 0
    }

    let offlineFraction: Double
    let onlineAt: UInt32?
    private(set) var records: [Record] = []
    private(set) var lines: [String: Line] = [:]

    init(offlineFraction: Double, onlineAt: UInt32?) {
        self.offlineFraction = min(1, max(0, offlineFraction))
        self.onlineAt = onlineAt
    }

    /// How many of `subscribers` are offline at `now`.
    func offline(of subscribers: Int, now: UInt32) -> Int {
        if let onlineAt = self.onlineAt, now >= onlineAt { return 0 }
        return min(subscribers, Int((Double(subscribers) * self.offlineFraction).rounded()))
    }

    /// Records an accepted broadcast on a channel with `subscribers` and fans it out.
    mutating func accept(_ passed: BroadcastRequestCheck.Passed, subscribers: Int, now: UInt32) -> Record {
        self.advance(passed.channelID, to: now)
        var line = self.lines[passed.channelID] ?? Line()
        let update = passed.update
        let offline = self.offline(of: subscribers, now: now)
        let online = subscribers - offline
        let seen = line.updates[update.updateDigest, default: 0]
        line.updates[update.updateDigest] = seen + 1
        line.accepted += 1
        if seen > 0 { line.duplicates += 1 }
        // Online subscribers take it when it is newer than what they show.
        let stale = line.shownTimestamp.map { update.timestamp <= $0 } ?? false
        if stale {
            if seen == 0 { line.staleArrivals += 1 }
        } else {
            line.shownTimestamp = update.timestamp
            line.shownUpdate = update.updateDigest
        }
        line.deliveredNow += online
        var stored = 0
        var dropped = 0
        if offline > 0 {
            if passed.policy == .mostRecentMessageStored && passed.expiration != 0 {
                // The newest stored message replaces the one kept before; its subscribers were counted then.
                let validThrough = min(passed.expiration, now &+ BroadcastRules.maximumStorageSeconds)
                // One message per channel waits: of two, the later timestamp; the other is superseded.
                if line.storedMessage != nil { line.superseded += offline }
                if line.storedMessage.map({ update.timestamp > $0.timestamp }) ?? true {
                    line.storedMessage = (update.updateDigest, update.timestamp, validThrough, offline)
                }
                stored = offline
            } else {
                dropped = offline
                line.dropped += offline
            }
        }
        let record = Record(
            channelID: passed.channelID,
            sequence: self.records.count,
            acceptedAt: now,
            timestamp: update.timestamp,
            event: update.event,
            payloadDigest: update.payloadDigest,
            updateDigest: update.updateDigest,
            priority: passed.priority,
            expiration: passed.expiration,
            policy: passed.policy,
            deliveredNow: online,
            stored: stored,
            dropped: dropped,
            duplicate: seen > 0,
            stale: stale
        )
        self.records.append(record)
        self.lines[passed.channelID] = line
        return record
    }

    /// Brings every channel's offline subscribers online when `now` has reached `onlineAt`: each takes its channel's
    /// stored message if it is still valid.
    mutating func advance(to now: UInt32) {
        guard let onlineAt = self.onlineAt, now >= onlineAt else { return }
        for id in self.lines.keys where self.lines[id]?.storedMessage != nil { self.advance(id, to: now) }
    }

    private mutating func advance(_ id: String, to now: UInt32) {
        guard let onlineAt = self.onlineAt, now >= onlineAt, var line = self.lines[id],
            let stored = line.storedMessage
        else { return }
        line.storedMessage = nil
        if stored.validThrough >= onlineAt {
            line.deliveredLater += stored.subscribers
        } else {
            line.expired += stored.subscribers
        }
        self.lines[id] = line
    }
}
