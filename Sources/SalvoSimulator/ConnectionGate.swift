import NIOConcurrencyHelpers
import NIOCore

/// The gateway's connection limits (`FaultPlan.ConnectionLimits`), checked right after accept.
///
/// APNs treats rapid connect/disconnect as a denial-of-service attack; the simulator refuses a
/// connection over a limit by closing it before the TLS handshake, so a sender sees a reconnect
/// storm fail the way it would against APNs. Shared by all event loops; locked per connect.
final class ConnectionGate: @unchecked Sendable {
    // @unchecked: all mutable state is behind `lock`.
    private let lock = NIOLock()
    private let limits: FaultPlan.ConnectionLimits
    private var open = 0
    private var lastConnect: [String: NIODeadline] = [:]
    private var recentConnects: [NIODeadline] = []

    init(limits: FaultPlan.ConnectionLimits) {
        self.limits = limits
    }

    /// Admits a connection from `address` now, or returns the reason it is refused.
    func admit(address: String, now: NIODeadline = .now()) -> String? {
        self.lock.withLock {
            if self.limits.maxOpen > 0 && self.open >= self.limits.maxOpen { return "maxOpen" }
            if self.limits.minIntervalPerClientMilliseconds > 0 {
                let interval = TimeAmount.milliseconds(Int64(self.limits.minIntervalPerClientMilliseconds))
                if let last = self.lastConnect[address], now < last + interval {
                    // A refused attempt restarts the wait: a storm stays refused until it calms down.
                    self.lastConnect[address] = now
                    return "minInterval"
                }
                if self.lastConnect.count > 10_000 { self.lastConnect.removeAll(keepingCapacity: true) }
                self.lastConnect[address] = now
            }
            if self.limits.maxConnectsPerSecond > 0 {
                let windowStart = now - .seconds(1)
                self.recentConnects.removeAll { $0 <= windowStart }
                if self.recentConnects.count >= self.limits.maxConnectsPerSecond { return "rate" }
                self.recentConnects.append(now)
            }
            self.open += 1
            return nil
        }
    }

    /// Records that an admitted connection closed.
    func release() {
        self.lock.withLock { self.open -= 1 }
    }
}
