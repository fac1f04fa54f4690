import APNSWire
import Foundation

/// The channels of every app, as a value: created, read, deleted and listed, with the per-app limit, ids that are
/// never issued twice, and each channel's publishing budget. Events in (with the time), answers out: no clock, no
/// lock, no I/O (`ChannelRegistry` keeps one behind a lock).
struct ChannelBook: Sendable {
    struct Channel: Sendable, Hashable {
        var id: String
        var app: String
        var policy: ChannelStoragePolicy
        /// UNIX seconds.
        var createdAt: UInt32
        var subscribers: Int
        /// The budget window the channel last published in, and how many broadcasts it published in it.
        var window: Int = -1
        var published: Int = 0
    }

    private(set) var channels: [String: Channel] = [:]
    /// Live channel ids per app, in creation order.
    private var order: [String: [String]] = [:]
    /// Every channel ever deleted, by id: never issued again, and answered ChannelNotRegistered.
    private(set) var deleted: [String: Channel] = [:]
    private(set) var created = 0
    private var serial: UInt64 = 0
    private let seed: UInt64

    init(seed: UInt64) {
        self.seed = seed
    }

    /// A new channel for `app`, or the reason it cannot have one (the limit counts live channels).
    mutating func create(
        app: String,
        policy: ChannelStoragePolicy,
        subscribers: Int,
        limit: Int,
        now: UInt32
    ) -> Result<Channel, APNSReason> {
        guard self.order[app, default: []].count < limit else {
            return .failure(BroadcastRules.cannotCreateChannelConfig)
        }
        var id: String
        repeat {
            self.serial &+= 1
            id = Self.channelID(serial: self.serial, seed: self.seed)
        } while self.channels[id] != nil || self.deleted[id] != nil
        let channel = Channel(id: id, app: app, policy: policy, createdAt: now, subscribers: max(0, subscribers))
        self.channels[id] = channel
        self.order[app, default: []].append(id)
        self.created += 1
        return .success(channel)
    }

    /// The live channel `id` of `app`; a deleted one, another app's or an unknown one is not registered.
    func channel(_ id: String, app: String) -> Channel? {
        guard let channel = self.channels[id], channel.app == app else { return nil }
        return channel
    }

    /// Deletes the channel; false when `app` has no live channel `id`.
    mutating func delete(_ id: String, app: String) -> Bool {
        guard self.channel(id, app: app) != nil, let channel = self.channels.removeValue(forKey: id) else {
            return false
        }
        self.deleted[id] = channel
        self.order[app]?.removeAll { $0 == id }
        return true
    }

    /// The live channels of `app`, oldest first.
    func list(app: String) -> [String] {
        self.order[app] ?? []
    }

    mutating func setSubscribers(_ count: Int, channel id: String) -> Bool {
        guard self.channels[id] != nil else { return false }
        self.channels[id]?.subscribers = max(0, count)
        return true
    }

    /// Charges one broadcast to the channel's budget at `now`; false (and nothing charged) when the window's budget
    /// is spent.
    mutating func charge(_ id: String, budget: BroadcastConfiguration.Budget, now: UInt32) -> Bool {
        guard var channel = self.channels[id] else { return false }
        let window = Int(now) / max(1, budget.windowSeconds)
        if channel.window != window {
            channel.window = window
            channel.published = 0
        }
        guard channel.published < budget.limit(for: channel.policy) else { return false }
        channel.published += 1
        self.channels[id] = channel
        return true
    }

    /// A channel id: 16 bytes, base64. The serial makes every id of this book distinct; the seeded half makes ids
    /// look unrelated and differ between simulators of different seeds.
    static func channelID(serial: UInt64, seed: UInt64) -> String {
        var generator = SeededGenerator(seed: seed ^ 0xC4A7_7E15, stream: serial)
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        let mixed = generator.next()
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: mixed >> shift)) }
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: serial >> shift)) }
        return Data(bytes).base64EncodedString()
    }

    /// Whether `text` can be a channel id at all: standard base64 (with its padding) of at least one byte, and not
    /// longer than `BroadcastRules.maximumChannelIdLength`. Otherwise APNs answers BadChannelId.
    static func isWellFormed(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= BroadcastRules.maximumChannelIdLength, text.utf8.count % 4 == 0 else {
            return false
        }
        guard let data = Data(base64Encoded: text) else { return false }
        return !data.isEmpty
    }
}
