import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time in UNIX seconds, as the binary interface counts it (expiry, feedback timestamps).
///
/// Injected so that the quality-of-service model and the feedback timestamps can be tested without
/// sleeping: production uses `SystemClock`, tests a `ManualClock`.
public protocol SimulatorClock: Sendable {
    /// The current time, UNIX seconds UTC.
    func now() -> UInt32
}

/// The system's real-time clock.
public struct SystemClock: SimulatorClock {
    public init() {}

    public func now() -> UInt32 {
        UInt32(truncatingIfNeeded: time(nil))
    }
}

/// A clock that moves only when told to; safe to share between event loops.
public final class ManualClock: SimulatorClock, @unchecked Sendable {
    // @unchecked: the only state is behind `lock`.
    private let lock = NIOLock()
    private var current: UInt32

    public init(now: UInt32) {
        self.current = now
    }

    public func now() -> UInt32 {
        self.lock.withLock { self.current }
    }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: UInt32) {
        self.lock.withLock { self.current &+= seconds }
    }

    /// Sets the clock to `seconds`.
    public func set(_ seconds: UInt32) {
        self.lock.withLock { self.current = seconds }
    }
}
