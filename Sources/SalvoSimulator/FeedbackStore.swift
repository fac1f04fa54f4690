import APNSWire
import NIOConcurrencyHelpers

/// The feedback service's lists: one per topic, each cleared when a connection reads it.
/// Shared by the feedback connections and the API (`Simulator.markUninstalled`); locked per call.
final class FeedbackStore: @unchecked Sendable {
    // @unchecked: all mutable state is behind `lock`.
    private let lock = NIOLock()
    private var lists: [String: [FeedbackTuple]] = [:]

    func add(topic: String, tuple: FeedbackTuple) {
        self.lock.withLock { self.lists[topic, default: []].append(tuple) }
    }

    /// Removes and returns the list for `topic` ("the list is cleared once read").
    func take(topic: String) -> [FeedbackTuple] {
        self.lock.withLock { self.lists.removeValue(forKey: topic) ?? [] }
    }

    /// Tuples waiting for `topic`, without clearing them.
    func pending(topic: String) -> Int {
        self.lock.withLock { self.lists[topic]?.count ?? 0 }
    }
}
