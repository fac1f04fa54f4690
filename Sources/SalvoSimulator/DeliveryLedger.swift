import APNSWire
import NIOConcurrencyHelpers

/// Every notification the gateway accepted, compactly: one 64-byte record per device token in a
/// `TokenTable`, plus the counters of a `LedgerSnapshot` and the quality-of-service model.
///
/// Shared by all connections on all event loops. The per-notification path never locks: each
/// connection fills its own `LedgerBatch` and merges it here once per read. Everything else
/// (errors, connections) is rare and locks per event.
public final class DeliveryLedger: @unchecked Sendable {
    // @unchecked: all mutable state is behind `lock`.
    private let lock = NIOLock()
    private let table: TokenTable
    let devices: DeviceModel
    private let clock: any SimulatorClock
    private var counters = LedgerSnapshot()
    private var histogram = [Int](repeating: 0, count: 16)
    /// A seeded fraction of accepted notifications never recorded (`FaultPlan.lostFraction`).
    private let lostFraction: Double
    private let lostSeed: UInt64

    /// Creates an empty ledger holding at most `maximumTokens` distinct tokens (rounded to a power
    /// of two of table slots at 3/4 load), with room for `expectedTokens` from the start.
    init(
        maximumTokens: Int,
        expectedTokens: Int = 0,
        devices: DeviceModel,
        clock: any SimulatorClock,
        lostFraction: Double = 0,
        seed: UInt64 = 0
    ) {
        func slots(_ tokens: Int) -> Int {
            var slots = 16
            while slots * 3 / 4 < tokens { slots <<= 1 }
            return slots
        }
        self.table = TokenTable(
            initialCapacity: max(1024, slots(min(expectedTokens, maximumTokens))),
            maximumCapacity: slots(maximumTokens)
        )
        self.devices = devices
        self.clock = clock
        self.lostFraction = lostFraction
        self.lostSeed = seed ^ 0x1057_1057
    }

    /// Merges one connection's batch and the statistics of one read (`accepted`: notifications
    /// accepted in the read, including any merged early by `mergeFullBatch`).
    func merge(_ batch: LedgerBatch, bytes: Int, accepted: Int, discarded: Int) {
        self.lock.withLock {
            _ = self.fold(batch)
            self.counters.discardedAfterError += discarded
            if bytes > 0 {
                self.counters.bytesReceived += bytes
                self.counters.reads += 1
                self.histogram[min(15, Int.bitWidth - accepted.leadingZeroBitCount)] += 1
                self.counters.maxNotificationsPerRead = max(self.counters.maxNotificationsPerRead, accepted)
            }
        }
    }

    /// Merges a batch that filled up in the middle of a read (the read's statistics come later).
    func mergeFullBatch(_ batch: LedgerBatch) {
        self.lock.withLock { _ = self.fold(batch) }
    }

    /// Folds `batch` into the table and the device model; call with the lock held.
    private func fold(_ batch: LedgerBatch) -> Int {
        let accepted = batch.count
        let devices = self.devices.isActive ? self.devices : nil
        let now = devices == nil ? 0 : self.clock.now()
        var refused = 0
        var repeated = 0
        let lost = self.lostFraction
        let losing: ((UnsafeRawPointer) -> Bool)? =
            lost > 0 ? { TokenHash.isInFraction($0, fraction: lost, seed: self.lostSeed) } : nil
        batch.drainAll { entries, entryCount in
            self.table.record(batch: entries, count: entryCount, losing: losing) { entry, count in
                if count == 0 {
                    refused += 1
                } else if count == 2 {
                    repeated += 1
                }
                devices?.accept(entry, now: now)
            }
        }
        self.counters.accepted += accepted
        self.counters.refusedForCapacity += refused
        self.counters.tokensAcceptedMoreThanOnce += repeated
        return accepted
    }

    /// Starts a new ledger: every record, counter and device forgotten (`salvo simulate --control-port`'s
    /// `POST /reset`, between the rounds of a soak against a running simulator). Notifications of connections
    /// still open land in the new ledger.
    public func reset() {
        self.lock.withLock {
            self.table.removeAll()
            self.devices.reset()
            self.counters = LedgerSnapshot()
            self.histogram = [Int](repeating: 0, count: 16)
        }
    }

    func recordErrorResponse(status: UInt8) {
        self.lock.withLock { self.counters.errorResponses[String(status), default: 0] += 1 }
    }

    func recordClosedWithoutResponse() {
        self.lock.withLock { self.counters.closedWithoutResponse += 1 }
    }

    func recordReset() {
        self.lock.withLock { self.counters.resets += 1 }
    }

    func recordRefusedStream() {
        self.lock.withLock { self.counters.refusedStreams += 1 }
    }

    func recordConnectionAccepted() {
        self.lock.withLock { self.counters.connectionsAccepted += 1 }
    }

    func recordConnectionRefused(reason: String) {
        self.lock.withLock { self.counters.connectionsRefused[reason, default: 0] += 1 }
    }

    func recordFeedback(tuples: Int) {
        self.lock.withLock {
            self.counters.feedbackConnections += 1
            self.counters.feedbackTuplesSent += tuples
        }
    }

    /// The counters now.
    public func snapshot() -> LedgerSnapshot {
        self.lock.withLock {
            self.devices.advance(to: self.clock.now())
            var snapshot = self.counters
            snapshot.distinctTokens = self.table.count
            snapshot.tableBytes = self.table.memoryBytes
            let last = self.histogram.lastIndex(where: { $0 != 0 }) ?? -1
            snapshot.notificationsPerReadHistogram = Array(self.histogram[0..<(last + 1)])
            snapshot.stored = self.devices.storedCount
            snapshot.coalesced = self.devices.coalescedCount
            snapshot.notStored = self.devices.notStoredCount
            snapshot.expired = self.devices.expiredCount
            snapshot.deliveredLater = self.devices.deliveredLaterCount
            return snapshot
        }
    }

    /// The record of the 32-byte token `token`, or nil when nothing was accepted for it.
    public func record(for token: [UInt8]) -> LedgerRecord? {
        guard token.count == DeviceToken.byteCount else { return nil }
        return self.lock.withLock {
            token.withUnsafeBytes { bytes in self.table.lookup(bytes.baseAddress!).map(LedgerRecord.init(record:)) }
        }
    }

    /// Runs `body` with the table and the device model under the lock, after bringing due devices
    /// online (for verdicts, which read every record once).
    func withTable<R>(_ body: (TokenTable, DeviceModel) throws -> R) rethrows -> R {
        try self.lock.withLock {
            self.devices.advance(to: self.clock.now())
            return try body(self.table, self.devices)
        }
    }
}
