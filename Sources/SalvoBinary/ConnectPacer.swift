import NIOConcurrencyHelpers
import SalvoRows

/// Spaces the connects of every shard of one job, and remembers when the job last made progress.
///
/// A gateway that limits how often a client may connect limits the client, not each connection: shards that
/// each keep their own floor connect together faster than that. So every connect of a job takes a slot here, at
/// least `interval` after the previous one; a refused connect doubles the interval (up to `ceiling`), a
/// successful one shrinks it by a quarter (down to `floor`). The job's opening connects, one per shard, are not
/// spaced (the opening slots): every provider opens its connections together, and a second connection 50 ms behind
/// the first was 50 ms of a short job sent on one connection. A refusal among them spaces the rest. Shards read `lastProgressAt` to tell a gateway that
/// paces connects (the job still settles rows) from one that is gone.
///
/// Thread-safe (one lock): taken once per connect and once per settled batch, never per notification.
final class ConnectPacer: Sendable {
    private struct State {
        var nextSlot: UInt64 = 0
        var interval: UInt64
        var lastProgressAt: UInt64
        /// Connects still to be given a slot without spacing.
        var opening: Int
    }

    let floor: UInt64
    let ceiling: UInt64
    private let state: NIOLockedValueBox<State>

    /// - Parameters:
    ///   - floor: the least time between two connects of the job (nanoseconds).
    ///   - ceiling: the most refusals may stretch it to.
    ///   - now: the job's start, its first progress.
    ///   - opening: the connects at the job's start (one per shard), given slots without spacing.
    init(floor: UInt64, ceiling: UInt64, now: UInt64, opening: Int = 0) {
        self.floor = floor
        self.ceiling = max(floor, ceiling)
        self.state = NIOLockedValueBox(State(interval: floor, lastProgressAt: now, opening: max(0, opening)))
    }

    /// Takes the first free slot at or after `earliest`, and no later than `latest` (nor before `earliest`): when to
    /// connect (same clock). `latest` is the job's give-up deadline: refusals stretch the spacing up to `ceiling`, and
    /// a connect pushed past the deadline would keep a job whose gateway is gone running that much longer.
    func slot(earliest: UInt64, latest: UInt64 = .max) -> UInt64 {
        self.state.withLockedValue { state in
            if state.opening > 0 {
                // An opening connect: now, and the next connect after it no sooner than the spacing.
                state.opening -= 1
                state.nextSlot = max(state.nextSlot, earliest &+ state.interval)
                return earliest
            }
            let at = min(max(earliest, state.nextSlot), max(earliest, latest))
            state.nextSlot = at &+ state.interval
            return at
        }
    }

    /// The gateway refused or dropped a connect: space the job's connects further apart.
    func refused() {
        self.state.withLockedValue { state in
            state.opening = 0
            // From a floor of 0 the first refusal still spaces connects: 10 ms.
            state.interval = min(self.ceiling, max(2 * state.interval, 10_000_000))
            state.nextSlot = max(state.nextSlot, state.nextSlot &+ state.interval / 2)
        }
    }

    /// A connect succeeded: come back toward the floor.
    func connected() {
        self.state.withLockedValue { state in
            state.interval = max(self.floor, state.interval - state.interval / 4)
        }
    }

    /// Some shard settled rows at `time`.
    func progressed(at time: UInt64) {
        self.state.withLockedValue { state in state.lastProgressAt = max(state.lastProgressAt, time) }
    }

    var lastProgressAt: UInt64 { self.state.withLockedValue { $0.lastProgressAt } }

    /// The current spacing between connects (nanoseconds), for tests and messages.
    var interval: UInt64 { self.state.withLockedValue { $0.interval } }
}
