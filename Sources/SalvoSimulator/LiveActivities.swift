import APNSWire
import NIOConcurrencyHelpers
import NIOCore

/// The simulator's device-side view of Live Activity pushes: every push the HTTP/2 endpoint accepts with
/// `apns-push-type: liveactivity` goes to a `LiveActivityBoard` behind a lock, shared by every connection. Read it
/// from tests and the control endpoint (`GET /live-activities`): `state(token:)`, `counters`.
///
/// It shows what devices would show, not what was delivered: the ledger still records every accepted push.
public final class LiveActivities: Sendable {
    private let board = NIOLockedValueBox(LiveActivityBoard())

    init() {}

    /// Takes an accepted push's payload for `token`.
    func receive(token: DeviceToken, payload: ByteBuffer) {
        let push = payload.withUnsafeReadableBytes { LiveActivityPush.parse($0) }
        self.board.withLockedValue { _ = $0.receive(push, token: token) }
    }

    /// What `token`'s activity shows; nil when no Live Activity push reached it.
    public func state(token: DeviceToken) -> LiveActivityState? {
        self.board.withLockedValue { $0.state(token: token) }
    }

    public var counters: LiveActivityCounters {
        self.board.withLockedValue { $0.counters }
    }

    /// Every token's state, for a report.
    public var states: [DeviceToken: LiveActivityState] {
        self.board.withLockedValue { $0.states }
    }

    /// The counters and every token's state by its hex, as the control endpoint serves them.
    public var view: LiveActivityView {
        self.board.withLockedValue { board in
            LiveActivityView(
                counters: board.counters,
                activities: Dictionary(uniqueKeysWithValues: board.states.map { ($0.key.hexString, $0.value) })
            )
        }
    }

    /// Forgets every activity (the control endpoint's `/reset`, with the ledger's).
    public func reset() {
        self.board.withLockedValue { $0 = LiveActivityBoard() }
    }
}

/// The device-side view of Live Activity pushes as JSON: the counters, and each token's shown state by its hex.
public struct LiveActivityView: Codable, Sendable, Equatable {
    public var counters: LiveActivityCounters
    public var activities: [String: LiveActivityState]
}
