/// When the pending events of a webhook go: as soon as `maximumEvents` wait, or once the oldest has waited
/// `maximumWait` milliseconds since it was made. A value with the time given.
public struct WebhookBatching: Sendable, Hashable {
    public var maximumEvents: Int
    /// Milliseconds.
    public var maximumWait: Int64

    public init(maximumEvents: Int = 100, maximumWait: Int64 = 1000) {
        self.maximumEvents = maximumEvents
        self.maximumWait = maximumWait
    }

    public enum Decision: Sendable, Hashable {
        /// Nothing is pending: wait for events.
        case idle
        /// Send the pending events now.
        case send
        /// Wait until this time (milliseconds since 1970), or until more events come.
        case wait(until: Int64)
    }

    /// - Parameters:
    ///   - pending: how many events are pending (at most `maximumEvents` are looked at).
    ///   - oldestCreatedAt: when the oldest of them was made.
    public func decide(pending: Int, oldestCreatedAt: Int64?, now: Int64) -> Decision {
        guard pending > 0, let oldest = oldestCreatedAt else { return .idle }
        if pending >= self.maximumEvents { return .send }
        let due = oldest + self.maximumWait
        return now >= due ? .send : .wait(until: due)
    }
}
