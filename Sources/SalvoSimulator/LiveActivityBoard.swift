import APNSWire
import Foundation

/// The fields of a Live Activity push that decide what a device shows: `aps.timestamp`, `aps.event` and
/// `aps.content-state` (as compact JSON with sorted keys, so two equal states compare equal).
public struct LiveActivityPush: Sendable, Hashable {
    public var timestamp: Int64
    public var event: LiveActivityEvent
    public var contentState: String?

    public init(timestamp: Int64, event: LiveActivityEvent, contentState: String? = nil) {
        self.timestamp = timestamp
        self.event = event
        self.contentState = contentState
    }

    /// Reads a payload's `aps`; nil when it is not JSON, or has no numeric `timestamp` or known `event`: a device
    /// cannot place such a push among the others and shows nothing of it.
    public static func parse(_ payload: some Collection<UInt8>) -> LiveActivityPush? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let aps = object["aps"] as? [String: Any],
            let stamp = aps["timestamp"] as? NSNumber,
            let name = aps["event"] as? String, let event = LiveActivityEvent(rawValue: name)
        else { return nil }
        var state: String?
        if let content = aps["content-state"],
            let data = try? JSONSerialization.data(withJSONObject: content, options: [.sortedKeys, .fragmentsAllowed])
        {
            state = String(decoding: data, as: UTF8.self)
        }
        return LiveActivityPush(timestamp: stamp.int64Value, event: event, contentState: state)
    }
}

/// What one device token's Live Activity shows now, and what arrived for it.
public struct LiveActivityState: Sendable, Hashable, Codable {
    /// The shown push: its `aps.timestamp`, `aps.event` and content state.
    public var timestamp: Int64
    public var event: String
    public var contentState: String?
    /// An `end` was shown: later updates are not.
    public var ended: Bool
    /// Pushes that arrived for the token (shown or not), those that were no newer than the one shown, and those
    /// that came after the activity ended.
    public var arrivals: Int
    public var staleIgnored: Int
    public var ignoredAfterEnd: Int
}

/// Counters over every token's Live Activity.
public struct LiveActivityCounters: Sendable, Hashable, Codable {
    /// Live Activity pushes accepted by the endpoint.
    public var arrivals = 0
    /// Pushes that became what their token shows.
    public var shown = 0
    /// Pushes whose timestamp was not newer than the shown one's: arrived, not shown.
    public var staleIgnored = 0
    /// Activities ended (an `end` shown).
    public var ended = 0
    /// Pushes to an ended activity: not shown.
    public var ignoredAfterEnd = 0
    /// Pushes without a readable `aps.timestamp` and `aps.event`: not shown.
    public var unreadable = 0
    /// Tokens with an activity shown (live or ended).
    public var activities = 0

    public init() {}
}

/// The device side of Live Activity pushes, as a value: per device token the activity's shown state, by Apple's rule
/// that the latest `aps.timestamp` wins (pushes may arrive out of order; an older one, or one of the same time, is
/// recorded as arriving and replaces nothing), `end` ends the activity (later updates are not shown), and a `start`
/// newer than the end begins a new one (a push-to-start token starts activity after activity). Events in, state out:
/// no clock, no lock, no I/O (`LiveActivities` keeps one behind a lock).
public struct LiveActivityBoard: Sendable {
    /// What a push did.
    public enum Outcome: Sendable, Hashable {
        case shown
        case staleIgnored
        case ignoredAfterEnd
        case unreadable
    }

    public private(set) var states: [DeviceToken: LiveActivityState] = [:]
    public private(set) var counters = LiveActivityCounters()

    public init() {}

    public func state(token: DeviceToken) -> LiveActivityState? {
        self.states[token]
    }

    /// Takes one accepted push for `token` (nil: its payload could not be read).
    @discardableResult
    public mutating func receive(_ push: LiveActivityPush?, token: DeviceToken) -> Outcome {
        self.counters.arrivals += 1
        guard let push else {
            self.counters.unreadable += 1
            if self.states[token] != nil { self.states[token]!.arrivals += 1 }
            return .unreadable
        }
        guard var state = self.states[token] else {
            self.states[token] = LiveActivityState(
                timestamp: push.timestamp,
                event: push.event.rawValue,
                contentState: push.contentState,
                ended: push.event == .end,
                arrivals: 1,
                staleIgnored: 0,
                ignoredAfterEnd: 0
            )
            self.counters.activities += 1
            self.counters.shown += 1
            if push.event == .end { self.counters.ended += 1 }
            return .shown
        }
        state.arrivals += 1
        let outcome: Outcome
        if state.ended && !(push.event == .start && push.timestamp > state.timestamp) {
            state.ignoredAfterEnd += 1
            self.counters.ignoredAfterEnd += 1
            outcome = .ignoredAfterEnd
        } else if push.timestamp <= state.timestamp {
            state.staleIgnored += 1
            self.counters.staleIgnored += 1
            outcome = .staleIgnored
        } else {
            state.timestamp = push.timestamp
            state.event = push.event.rawValue
            // An update without a content state keeps the one shown (an alert-only update, say).
            state.contentState = push.contentState ?? (push.event == .start ? nil : state.contentState)
            state.ended = push.event == .end
            self.counters.shown += 1
            if push.event == .end { self.counters.ended += 1 }
            outcome = .shown
        }
        self.states[token] = state
        return outcome
    }
}
