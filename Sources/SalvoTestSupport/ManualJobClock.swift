import Dispatch
import NIOConcurrencyHelpers
import SalvoRows

/// A job's clock that moves only when the test moves it (`advance(by:)`), or, made with `sleepsMoveIt`, by as much
/// as each pause asks for: a test of a timeout, a backoff or a give-up waits for none of it in real time, and a test
/// of something that must happen at once holds the clock still and sees that the job needed no timer to get there.
///
/// Timers (`schedule`) run on their queue, in the order they fall due, inside `advance`; pauses (`sleep`) are resumed
/// there too. It starts at 1,000 s: a job reads times before its start as zero.
public final class ManualJobClock: JobClock, Sendable {
    private struct Timer {
        var due: UInt64
        var order: Int
        var queue: DispatchQueue
        var work: @Sendable () -> Void
    }

    private struct Sleeper {
        var due: UInt64
        var order: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: UInt64
        var order = 0
        var timers: [Timer] = []
        var sleepers: [Int: Sleeper] = [:]
    }

    private let state: NIOLockedValueBox<State>
    private let sleepsMoveIt: Bool
    /// Where the clock started (nanoseconds).
    public let start: UInt64

    /// - Parameter sleepsMoveIt: a pause moves the clock by as much as it asks for and returns at once (for code that
    ///   waits in turn, one pause at a time: a retry loop); false, a pause waits for `advance`.
    public init(sleepsMoveIt: Bool = false, start: UInt64 = 1_000_000_000_000) {
        self.start = start
        self.sleepsMoveIt = sleepsMoveIt
        self.state = NIOLockedValueBox(State(now: start))
    }

    public var now: UInt64 { self.state.withLockedValue { $0.now } }

    /// How far the clock has moved since it started.
    public var elapsed: Duration { .nanoseconds(Int64(self.now - self.start)) }

    /// Timers not yet due.
    public var pendingTimers: Int { self.state.withLockedValue { $0.timers.count } }

    /// Pauses not yet over.
    public var sleepers: Int { self.state.withLockedValue { $0.sleepers.count } }

    public func schedule(after nanoseconds: UInt64, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        self.state.withLockedValue { state in
            let (due, overflow) = state.now.addingReportingOverflow(nanoseconds)
            state.order += 1
            state.timers.append(Timer(due: overflow ? .max : due, order: state.order, queue: queue, work: work))
        }
    }

    public func sleep(nanoseconds: UInt64) async {
        if self.sleepsMoveIt {
            self.advance(nanoseconds: nanoseconds)
            return
        }
        let id = self.state.withLockedValue { state -> Int in
            state.order += 1
            return state.order
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLockedValue { state -> Bool in
                    guard nanoseconds > 0, !Task.isCancelled else { return true }
                    let (due, overflow) = state.now.addingReportingOverflow(nanoseconds)
                    state.sleepers[id] = Sleeper(due: overflow ? .max : due, order: id, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.state.withLockedValue { $0.sleepers.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Keeps the clock running: every `tick` of real time it moves by `step` (so time runs `step / tick` times as
    /// fast as real time), for as long as `condition` holds when the tick comes, until the returned `Run` is stopped.
    /// The ticks come on a queue of their own, off the concurrency pool, and the condition is read just before each
    /// move: a test that lets a job reach a timeout quickly, but holds the clock still from a point (a row sent a
    /// second time must not time out), says so in the condition rather than in a loop of its own.
    public func run(
        every tick: Duration = .milliseconds(10),
        by step: Duration,
        while condition: @escaping @Sendable () -> Bool = { true }
    ) -> Run {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "salvo.manual-clock.run"))
        let interval = DispatchTimeInterval.nanoseconds(Int(tick.nanoseconds))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [self] in
            if condition() { self.advance(by: step) }
        }
        timer.resume()
        return Run(timer: timer)
    }

    /// A clock kept running by `run(every:by:while:)`; `stop()` (or its end) holds it still again.
    /// (`@unchecked`: the timer source is only cancelled, which is thread-safe; Dispatch does not mark it Sendable.)
    public final class Run: @unchecked Sendable {
        private let timer: any DispatchSourceTimer

        init(timer: any DispatchSourceTimer) { self.timer = timer }

        /// Stops the ticks; a tick already running finishes first.
        public func stop() { self.timer.cancel() }

        deinit { self.timer.cancel() }
    }

    /// Moves the clock forward by `duration`, running each timer and ending each pause that falls due on the way, in
    /// order, with the clock at its time. A timer's work runs on its queue before this returns (a timer it sets that
    /// falls due within `duration` runs too); a pause ended here resumes its task, which goes on afterwards.
    public func advance(by duration: Duration) {
        self.advance(nanoseconds: duration.nanoseconds)
    }

    private func advance(nanoseconds: UInt64) {
        let target = self.state.withLockedValue { state in
            let (target, overflow) = state.now.addingReportingOverflow(nanoseconds)
            return overflow ? .max : target
        }
        while true {
            enum Next {
                case timer(Timer)
                case sleeper(Sleeper)
            }
            let next = self.state.withLockedValue { state -> Next? in
                let timer = state.timers.indices.filter { state.timers[$0].due <= target }
                    .min {
                        (state.timers[$0].due, state.timers[$0].order) < (state.timers[$1].due, state.timers[$1].order)
                    }
                let sleeper = state.sleepers.values.filter { $0.due <= target }.min {
                    ($0.due, $0.order) < ($1.due, $1.order)
                }
                if let index = timer {
                    let first = state.timers[index]
                    if sleeper.map({ (first.due, first.order) < ($0.due, $0.order) }) ?? true {
                        state.timers.remove(at: index)
                        state.now = max(state.now, first.due)
                        return .timer(first)
                    }
                }
                if let sleeper {
                    state.sleepers.removeValue(forKey: sleeper.order)
                    state.now = max(state.now, sleeper.due)
                    return .sleeper(sleeper)
                }
                state.now = max(state.now, target)
                return nil
            }
            switch next {
            case nil: return
            case .timer(let timer): timer.queue.sync(execute: timer.work)
            case .sleeper(let sleeper): sleeper.continuation.resume()
            }
        }
    }
}
