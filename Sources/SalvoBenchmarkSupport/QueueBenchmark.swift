import SalvoService
import Synchronization

/// The service's queue alone, through its store (`salvo-bench queue`): no HTTP, no gateway. One loop a store, each a
/// worker of its own (the stores of a fleet share one PostgreSQL database), writes cycles as `NotificationService`'s
/// writer does: the requests' new notifications that arrived since the last cycle, the outcomes of the rows the
/// last cycle handed out (every one delivered, as a push service that answers at once would have them), and a claim
/// of as many rows as the service's feed holds (`ServiceConfiguration.defaultFeedRows`: its sending job takes every
/// row at once, so the feed is empty at every cycle). A worker whose cycle found nothing to do waits, as an idle
/// service does, for another worker's rows (`watchQueue`) or its poll (`NotificationService.claimPoll`), and renews
/// the leases of the rows it holds as often as the service does (`leaseRenewal`).
///
/// Runs until every row has its outcome or `Settings.maximumSeconds` have passed (checked before every cycle).
public enum QueueBenchmark {
    public struct Settings: Sendable {
        /// Notifications in all, shared among the workers.
        public var rows = 200_000
        /// Notifications a request.
        public var batch = 100
        /// Requests one cycle takes at most: the requests that arrived while the cycle before was written.
        /// `Benchmarks/service.sh`'s load keeps 16 requests open.
        public var requestsPerCycle = 16
        /// Rows a cycle claims: the service's feed.
        public var claim = ServiceConfiguration.defaultFeedRows
        public var maximumSeconds = 300.0

        public init() {}
    }

    /// What a worker's cycles did.
    public struct Tally: Sendable, Hashable {
        public var cycles = 0
        public var requests = 0
        /// Notifications stored.
        public var accepted = 0
        /// Cycles with a claim: each runs the claim's statement.
        public var claimStatements = 0
        /// Rows handed out: taken from the queue by the claim, or stored already handed out in the cycle that
        /// accepted them (the room the claim left).
        public var claimed = 0
        /// Of `claimed`, those the claim's statement took from the queue.
        public var claimedFromQueue = 0
        /// Outcomes committed.
        public var outcomes = 0
        /// Outcomes the store refused: another worker took the row over (none in a run whose leases held).
        public var fenced = 0
        /// Rows ended without being handed out (expired; uncertain after a lease ran out): none in a sound run.
        public var ended = 0
        public var renewals = 0
        /// Cycles that found nothing to do, each followed by a wait for work.
        public var idle = 0

        public init() {}

        public mutating func add(_ other: Tally) {
            self.cycles += other.cycles
            self.requests += other.requests
            self.accepted += other.accepted
            self.claimStatements += other.claimStatements
            self.claimed += other.claimed
            self.claimedFromQueue += other.claimedFromQueue
            self.outcomes += other.outcomes
            self.fenced += other.fenced
            self.ended += other.ended
            self.renewals += other.renewals
            self.idle += other.idle
        }
    }

    /// What a run did, before its check.
    public struct Run: Sendable {
        public var settings: Settings
        /// Each worker's, in the order of the stores.
        public var workers: [Tally]
        public var total: Tally
        /// From the first cycle to the end of the last worker.
        public var seconds: Double
        /// From the first cycle to the commit of the last notification; nil when not all were stored.
        public var acceptSeconds: Double?
        /// From the first cycle to the commit of the cycle that handed out the last row; nil when not all were.
        public var claimSeconds: Double?
        /// `maximumSeconds` passed first.
        public var timedOut: Bool
        /// Claims of a row already claimed: two workers holding one row at once (none with `SKIP LOCKED`).
        public var claimedTwice: Int
        /// Every notification stored, by id.
        public var ids: [String]
    }

    /// The store's own record of every notification of a run.
    public struct Check: Sendable, Hashable {
        public var expected: Int
        /// Notifications the store has of the run's ids.
        public var found: Int
        /// Of those, the ones delivered (200, their `apns-id` the answer's).
        public var delivered: Int

        public init(expected: Int, found: Int, delivered: Int) {
            self.expected = expected
            self.found = found
            self.delivered = delivered
        }

        public var passed: Bool { self.found == self.expected && self.delivered == self.expected }
    }

    /// Runs `settings.rows` notifications through `stores`, one loop a store.
    ///
    /// - Throws: the first `StoreFailure` of any store (the other loops stop then).
    public static func run(stores: [any NotificationStore], settings: Settings) async throws(StoreFailure) -> Run {
        precondition(!stores.isEmpty, "a run needs a store")
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int64(settings.maximumSeconds * 1000))
        let signals = stores.map { _ in QueueSignal() }
        let progress = QueueProgress(target: settings.rows, signals: signals)
        let workers = stores.enumerated().map { index, store in
            QueueWorker(
                store: store,
                index: index,
                share: settings.rows / stores.count + (index < settings.rows % stores.count ? 1 : 0),
                settings: settings,
                progress: progress,
                signal: signals[index],
                deadline: deadline
            )
        }
        var results: [QueueWorker.Result?] = Array(repeating: nil, count: workers.count)
        do {
            try await withThrowingTaskGroup(of: (Int, QueueWorker.Result).self) { group in
                for (index, worker) in workers.enumerated() {
                    group.addTask { (index, try await worker.run()) }
                }
                for try await (index, result) in group { results[index] = result }
            }
        } catch let failure as StoreFailure {
            throw failure
        } catch {
            throw StoreFailure("\(error)")
        }
        let finished = results.compactMap(\.self)
        var total = Tally()
        for result in finished { total.add(result.tally) }
        let end = finished.map(\.end).max() ?? start
        let claimedSeqs = finished.reduce(into: Set<Int>()) { $0.formUnion($1.claimedSeqs) }
        return Run(
            settings: settings,
            workers: finished.map(\.tally),
            total: total,
            seconds: Self.seconds(end - start),
            acceptSeconds: progress.allStoredAt.map { Self.seconds($0 - start) },
            claimSeconds: progress.allClaimedAt.map { Self.seconds($0 - start) },
            timedOut: finished.contains(where: \.timedOut),
            claimedTwice: total.claimed - claimedSeqs.count,
            ids: finished.flatMap(\.ids)
        )
    }

    /// Reads every notification of `ids` back from `store`, a thousand at a time, and counts the delivered ones
    /// against the `expected` of the run.
    public static func check(
        ids: [String],
        expected: Int,
        in store: any NotificationStore
    ) async throws(StoreFailure) -> Check {
        var check = Check(expected: expected, found: 0, delivered: 0)
        var from = 0
        while from < ids.count {
            let chunk = Array(ids[from..<min(from + 1000, ids.count)])
            from += chunk.count
            let records = try await store.notifications(ids: chunk)
            check.found += records.count
            check.delivered += records.count { $0.state == .delivered && $0.status == 200 && $0.apnsID == $0.id }
        }
        return check
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}

/// What the workers share: the notifications stored and claimed so far, when the last was, and the wake of every
/// worker once all are stored.
final class QueueProgress: Sendable {
    private struct State {
        var stored = 0
        var storedAt: ContinuousClock.Instant?
        var claimed = 0
        var claimedAt: ContinuousClock.Instant?
    }

    private let target: Int
    private let signals: [QueueSignal]
    private let state: Mutex<State>

    init(target: Int, signals: [QueueSignal]) {
        self.target = target
        self.signals = signals
        self.state = Mutex(State())
    }

    /// A cycle committed `count` more notifications.
    func stored(_ count: Int) {
        let complete = self.state.withLock { state -> Bool in
            state.stored += count
            guard state.stored >= self.target, state.storedAt == nil else { return false }
            state.storedAt = .now
            return true
        }
        // A worker waiting for more rows has none to wait for now: its next claim is its last.
        if complete { for signal in self.signals { signal.signal() } }
    }

    /// A cycle committed `count` more rows handed out.
    func claimed(_ count: Int) {
        self.state.withLock { state in
            state.claimed += count
            if state.claimed >= self.target, state.claimedAt == nil { state.claimedAt = .now }
        }
    }

    var allStored: Bool { self.state.withLock { $0.stored >= self.target } }

    var allStoredAt: ContinuousClock.Instant? { self.state.withLock { $0.storedAt } }

    var allClaimedAt: ContinuousClock.Instant? { self.state.withLock { $0.claimedAt } }
}

/// A worker's wake-up: signalled by another worker's queued rows (`watchQueue`), the end of the requests, or its
/// poll's timer. A signal with no one waiting is kept for the next wait.
final class QueueSignal: Sendable {
    private let state = Mutex<(signalled: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            if state.waiter == nil { state.signalled = true }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits for a signal, `limit` at most.
    func wait(atMost limit: Duration) async {
        let timer = Task {
            // Cancelled when the wait ended first: no signal then, or the next wait would end at once.
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            self.signal()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = self.state.withLock { state -> Bool in
                if state.signalled {
                    state.signalled = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
        timer.cancel()
    }
}
