import Dispatch

/// Where a job reads the time and waits for it.
///
/// A job's decisions by time — give up, settle, deadlines, backoff, watchdogs — are pure values that take `now`
/// (`BinaryConnectionMachine`, `ConnectPacer`, `HTTP2ProgressWatch`); what drives them reads `now` here, and runs its
/// timers and pauses here. A job runs on `SystemJobClock`; a test hands it a clock it moves itself
/// (`ManualJobClock` in `SalvoTestSupport`), so that a test of a timeout waits for no real time, and a test of
/// something that must happen at once can hold the clock still and see that no timeout was needed.
public protocol JobClock: Sendable {
    /// Nanoseconds on a monotonic clock; only differences mean anything.
    var now: UInt64 { get }

    /// Runs `work` on `queue` once `nanoseconds` have passed on this clock.
    func schedule(after nanoseconds: UInt64, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)

    /// Returns once `nanoseconds` have passed on this clock, or at once when the task is cancelled.
    func sleep(nanoseconds: UInt64) async
}

extension JobClock {
    /// Returns once `duration` has passed on this clock (a negative one: at once).
    public func sleep(for duration: Duration) async {
        guard duration > .zero else { return }
        await self.sleep(nanoseconds: duration.nanoseconds)
    }
}

/// The system's monotonic clock (`DispatchTime`'s uptime), Dispatch's timers and `Task.sleep`.
public struct SystemJobClock: JobClock {
    public init() {}

    public var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    public func schedule(after nanoseconds: UInt64, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(min(nanoseconds, UInt64(Int.max)))), execute: work)
    }

    public func sleep(nanoseconds: UInt64) async {
        try? await Task.sleep(nanoseconds: nanoseconds)
    }
}
