import NIOCore

/// A token bucket for `--rate`: at most `perSecond` requests per second across every connection of a job, with a
/// burst of at most 50 ms worth. It starts empty, so a campaign that must not burst never does, even at its start.
///
/// A value with the time passed in (tested with a fake clock); the job shares one behind a lock that a connection
/// takes once per batch of requests, never per request.
package struct HTTP2RateLimiter {
    let perSecond: Double
    let capacity: Double
    private var tokens: Double = 0
    private var last: NIODeadline

    package init(perSecond: Int, now: NIODeadline) {
        self.perSecond = Double(max(1, perSecond))
        self.capacity = max(1, self.perSecond * 0.05)
        self.last = now
    }

    /// Takes up to `wanted` requests' worth now; returns how many may go.
    package mutating func take(upTo wanted: Int, now: NIODeadline) -> Int {
        self.refill(now: now)
        let granted = min(wanted, Int(self.tokens))
        self.tokens -= Double(granted)
        return granted
    }

    /// Returns what was taken and not used (fewer rows were ready than granted).
    mutating func giveBack(_ count: Int) {
        self.tokens = min(self.capacity, self.tokens + Double(count))
    }

    /// When the next request may go.
    package func nextAvailable(now: NIODeadline) -> NIODeadline {
        let missing = 1 - self.tokens
        guard missing > 0 else { return now }
        return self.last + .nanoseconds(Int64((missing / self.perSecond * 1e9).rounded(.up)))
    }

    private mutating func refill(now: NIODeadline) {
        guard now > self.last else { return }
        let elapsed = Double((now - self.last).nanoseconds) / 1e9
        self.tokens = min(self.capacity, self.tokens + elapsed * self.perSecond)
        self.last = now
    }
}
