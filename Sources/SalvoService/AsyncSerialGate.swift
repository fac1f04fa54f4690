import DequeModule
import NIOConcurrencyHelpers

/// Lets one task at a time through, in order of arrival, across suspension points: what a connection that runs one
/// transaction at a time needs (an actor would let a second caller in at its first `await`). Waiting suspends the
/// task; nothing blocks a thread.
final class AsyncSerialGate: Sendable {
    private struct State {
        var busy = false
        var waiting = Deque<CheckedContinuation<Void, Never>>()
    }

    private let state = NIOLockedValueBox(State())

    func run<T: Sendable, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        await self.enter()
        defer { self.leave() }
        return try await body()
    }

    private func enter() async {
        let entered = self.state.withLockedValue { state -> Bool in
            guard state.busy else {
                state.busy = true
                return true
            }
            return false
        }
        guard !entered else { return }
        await withCheckedContinuation { continuation in
            let now = self.state.withLockedValue { state -> Bool in
                // The holder may have left between the first look and this one.
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func leave() {
        let next = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let next = state.waiting.popFirst() else {
                state.busy = false
                return nil
            }
            // The gate passes straight to the next in line: `busy` stays true.
            return next
        }
        next?.resume()
    }
}
