import Dispatch

/// Timeouts are `Duration`s in the API and `DispatchTimeInterval`s for Dispatch timers.
extension Duration {
    var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        return .nanoseconds(Int(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }
}
