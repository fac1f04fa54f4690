import NIOConcurrencyHelpers
import NIOCore

/// Requests that hold their answer until notifications are final (`?wait=`): each waits for a set of ids, and the
/// service's writer says which ids became final after each cycle. Every wait is bounded by its timeout.
final class OutcomeWaiters: Sendable {
    private struct Waiter {
        var remaining: Set<String>
        var continuation: CheckedContinuation<Void, Never>?
    }

    private struct State {
        var next = 0
        var waiters: [Int: Waiter] = [:]
        var byID: [String: Set<Int>] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// Waiting requests, for the metrics and tests.
    var count: Int { self.state.withLockedValue { $0.waiters.count } }

    /// Returns when every one of `ids` is final, or after `timeout`.
    ///
    /// - Parameter open: which of `ids` the store has not seen final; asked after the wait is registered, so that
    ///   an id that becomes final meanwhile is never missed.
    func wait(
        for ids: Set<String>,
        timeout: TimeAmount,
        timers: LoopTimers,
        open: () async -> Set<String>
    ) async {
        guard !ids.isEmpty, timeout > .zero else { return }
        let token = self.state.withLockedValue { state -> Int in
            state.next += 1
            state.waiters[state.next] = Waiter(remaining: ids)
            for id in ids { state.byID[id, default: []].insert(state.next) }
            return state.next
        }
        let stillOpen = await open()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = self.state.withLockedValue { state -> Bool in
                guard var waiter = state.waiters[token] else { return true }
                waiter.remaining.formIntersection(stillOpen)
                guard !waiter.remaining.isEmpty else {
                    Self.remove(token, &state)
                    return true
                }
                waiter.continuation = continuation
                state.waiters[token] = waiter
                return false
            }
            if done {
                continuation.resume()
            } else {
                timers.schedule(in: timeout) { self.end(token) }
            }
        }
    }

    /// These notifications are final.
    func settled(_ ids: some Sequence<String>) {
        let ready = self.state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            guard !state.waiters.isEmpty else { return [] }
            var ready: [CheckedContinuation<Void, Never>] = []
            for id in ids {
                guard let tokens = state.byID.removeValue(forKey: id) else { continue }
                for token in tokens {
                    guard var waiter = state.waiters[token] else { continue }
                    waiter.remaining.remove(id)
                    // A waiter still asking the store has no continuation yet: it looks at `remaining` then.
                    if waiter.remaining.isEmpty, let continuation = waiter.continuation {
                        Self.remove(token, &state)
                        ready.append(continuation)
                    } else {
                        state.waiters[token] = waiter
                    }
                }
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Ends every wait now (the service stops).
    func endAll() {
        let all = self.state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            let all = state.waiters.values.compactMap(\.continuation)
            state.waiters.removeAll()
            state.byID.removeAll()
            return all
        }
        for continuation in all { continuation.resume() }
    }

    private func end(_ token: Int) {
        let continuation = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiters[token] else { return nil }
            Self.remove(token, &state)
            return waiter.continuation
        }
        continuation?.resume()
    }

    private static func remove(_ token: Int, _ state: inout State) {
        guard let waiter = state.waiters.removeValue(forKey: token) else { return }
        for id in waiter.remaining {
            state.byID[id]?.remove(token)
            if state.byID[id]?.isEmpty == true { state.byID[id] = nil }
        }
    }
}
