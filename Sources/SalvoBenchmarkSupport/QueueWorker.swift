import SalvoService

/// One store's loop in `QueueBenchmark`: the cycles of one `salvo serve` worker's writer, with its requests and a
/// sending job that answers every row it is handed by the next cycle.
struct QueueWorker: Sendable {
    let store: any NotificationStore
    let index: Int
    /// Notifications this worker accepts.
    let share: Int
    let settings: QueueBenchmark.Settings
    let progress: QueueProgress
    let signal: QueueSignal
    let deadline: ContinuousClock.Instant

    struct Result: Sendable {
        var tally: QueueBenchmark.Tally
        /// The ids of the notifications it stored.
        var ids: [String]
        var claimedSeqs: [Int]
        var timedOut: Bool
        var end: ContinuousClock.Instant
    }

    func run() async throws(StoreFailure) -> Result {
        var requests = QueueRequests(stream: self.index)
        var left = self.share
        var tally = QueueBenchmark.Tally()
        var ids: [String] = []
        ids.reserveCapacity(self.share)
        var claimedSeqs: [Int] = []
        /// The outcomes of the rows the last cycle handed out.
        var answers: [OutcomeUpdate] = []
        var renewed = ContinuousClock.now
        var timedOut = false
        let signal = self.signal
        self.store.watchQueue { signal.signal() }
        while !Task.isCancelled {
            guard ContinuousClock.now < self.deadline else {
                timedOut = true
                break
            }
            // Read before the cycle: when every notification was stored before its claim, a claim that finds
            // nothing means the queue is empty for good.
            let allStored = self.progress.allStored
            let now = ServiceClock.milliseconds()
            var cycle = StoreCycle(now: now)
            var fresh: Set<String> = []
            var rows = 0
            while cycle.accepts.count < self.settings.requestsPerCycle, left > 0 {
                let accept = requests.next(min(self.settings.batch, left), now: now)
                left -= accept.notifications.count
                rows += accept.notifications.count
                for notification in accept.notifications { fresh.insert(notification.id) }
                cycle.accepts.append(accept)
            }
            cycle.outcomes = answers
            cycle.claim = self.settings.claim
            let result = try await self.store.write(cycle)
            let answeredAt = ServiceClock.milliseconds()
            if let refused = result.accepts.first(where: { $0 != .stored }) {
                throw StoreFailure("a request's notifications were not stored: \(refused)")
            }
            for accept in cycle.accepts { ids += accept.notifications.map(\.id) }
            if rows > 0 { self.progress.stored(rows) }
            if !result.claimed.isEmpty { self.progress.claimed(result.claimed.count) }
            tally.cycles += 1
            tally.requests += cycle.accepts.count
            tally.accepted += rows
            if cycle.claim > 0 { tally.claimStatements += 1 }
            tally.claimed += result.claimed.count
            tally.claimedFromQueue += result.claimed.count { !fresh.contains($0.notification.id) }
            tally.outcomes += cycle.outcomes.count - result.fenced.count
            tally.fenced += result.fenced.count
            tally.ended += result.expired.count + result.uncertain.count
            claimedSeqs += result.claimed.map(\.seq)
            answers = result.claimed.map { row in
                var update = OutcomeUpdate(seq: row.seq, state: .delivered, at: answeredAt)
                update.status = 200
                update.apnsID = row.notification.headers.id ?? row.notification.id
                return update
            }
            if let every = self.store.leaseRenewal, ContinuousClock.now - renewed >= every {
                _ = try await self.store.renewLeases(Set(answers.map(\.seq)), now: ServiceClock.milliseconds())
                tally.renewals += 1
                renewed = .now
            }
            if left == 0, answers.isEmpty, allStored { break }
            if cycle.accepts.isEmpty, cycle.outcomes.isEmpty, result.claimed.isEmpty {
                tally.idle += 1
                await self.signal.wait(atMost: NotificationService.claimPoll)
            }
        }
        return Result(tally: tally, ids: ids, claimedSeqs: claimedSeqs, timedOut: timedOut, end: .now)
    }
}
