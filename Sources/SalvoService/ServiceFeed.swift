import DequeModule
import NIOConcurrencyHelpers
import NIOCore
import SalvoHTTP2
import SalvoRows

/// The rows the service has taken from its store for the sending job: the store's writer pushes them, the job's
/// read-ahead queue takes them (`HTTP2RowFeed`), waiting at most `wait` when none is ready. Bounded by what the
/// writer claims (`wanted`), never by the store's backlog.
final class ServiceFeed: HTTP2RowFeed, @unchecked Sendable {
    /// 1 while rows are ready or the feed is closed; 0 while the reader would wait. `items` and `closed` are only
    /// touched with the lock held.
    private let condition = ConditionLock(value: 0)
    private var items = Deque<HTTP2WorkItem>()
    private var closed = false
    /// How long `nextItems` waits for a row before it returns none (the job's read-ahead then asks again).
    private let wait: Double
    /// Rows the feed aims to hold ready, so that a connection never waits on the store.
    let target: Int
    /// Called (outside the lock) when the rows ready fall below half the target: the writer claims more.
    private let onLow: @Sendable () -> Void

    let maximumBodyLength = 5120

    init(target: Int = 2048, wait: Double = 0.1, onLow: @escaping @Sendable () -> Void) {
        self.target = target
        self.wait = wait
        self.onLow = onLow
    }

    /// Rows for the job (after the store marked them being sent). Ignored once closed: the caller queues them again.
    /// - Returns: whether the feed took them.
    func push(_ new: [HTTP2WorkItem]) -> Bool {
        self.condition.lock()
        guard !self.closed else {
            self.condition.unlock()
            return false
        }
        self.items.append(contentsOf: new)
        self.condition.unlock(withValue: self.items.isEmpty ? 0 : 1)
        return true
    }

    /// The rows ready now.
    var ready: Int {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.items.count
    }

    /// How many rows the writer should claim to fill the feed (0 once closed).
    var wanted: Int {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.closed ? 0 : max(0, self.target - self.items.count)
    }

    func nextItems(maximumRows: Int) -> [HTTP2WorkItem]? {
        guard self.condition.lock(whenValue: 1, timeoutSeconds: self.wait) else { return [] }
        if self.items.isEmpty {
            // Closed (the value is 1 only with rows or when closed).
            self.condition.unlock()
            return nil
        }
        let count = min(maximumRows, self.items.count)
        var taken: [HTTP2WorkItem] = []
        taken.reserveCapacity(count)
        for _ in 0..<count { taken.append(self.items.removeFirst()) }
        let low = !self.closed && self.items.count < self.target / 2
        self.condition.unlock(withValue: self.items.isEmpty && !self.closed ? 0 : 1)
        if low { self.onLow() }
        return taken
    }

    /// Closes the feed: the job takes no more rows. - Returns: the rows it never took (to queue again).
    func close() -> [HTTP2WorkItem] {
        self.condition.lock()
        self.closed = true
        let left = Array(self.items)
        self.items.removeAll()
        self.condition.unlock(withValue: 1)
        return left
    }
}
