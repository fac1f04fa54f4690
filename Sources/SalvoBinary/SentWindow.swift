import APNSWire
import DequeModule
import SalvoRows

/// The notifications written on one connection and not yet settled, in the order they were written.
///
/// The binary gateway never acknowledges a notification; it answers only a failure, with the failed
/// notification's identifier, and then discards everything written after it on that connection. So each
/// connection journals what it wrote: identifiers are a per-connection sequence (1, 2, 3, …, skipping 0,
/// which gateways use when they cannot tell which notification failed), and an identifier finds its entry
/// by arithmetic, not by search. An entry leaves the window when the gateway's answer settles it, or when
/// it has been on a live connection longer than the settle time (it is then presumed accepted).
///
/// Compact, because at millions of notifications a second a second's worth of rows is in flight: an
/// entry is a row's line and file position (16 bytes), not its token, which is read again from the file
/// in the rare case that a settlement needs it (a rejection, a resend); identifiers follow from positions,
/// and the facts about time are kept per batch (`markWritten`), not per row. The rows live in a ring whose pages
/// go back to the kernel as they settle, so a window sized for the fastest gateway costs a slow one nothing.
///
/// The settle time runs from when the gateway has certainly *read* a batch, not from when it was written:
/// a slow gateway leaves written bytes in our send queue and in its own receive buffer for a long time, and
/// presuming them accepted a second after writing would be a guess. The owner learns how far the gateway
/// has read (`observe(consumedThrough:at:)`) from what the gateway's TCP has acknowledged, less the most its
/// receive buffer can hold. A pure value: the shard that owns the connection applies what the
/// gateway says and carries out the resulting `Settlement`. Bounded: the owner stops encoding while
/// `isFull`.
struct SentWindow {
    /// A row as the window keeps it.
    struct Journaled: Hashable {
        var line: Int
        var reference: RowReference
        /// The end-of-job barrier, not a row.
        var isBarrier: Bool { self.line < 0 }
    }

    /// A settled entry that needs its row: the row (token read again) and the identifier it was written with.
    struct Entry: Hashable {
        var row: TokenRow
        var identifier: UInt32
        /// The end-of-job barrier, not a row.
        var isBarrier: Bool { self.row.line < 0 }
    }

    /// What an answer from the gateway (or its silence) decided.
    struct Settlement: Equatable {
        /// How many rows were accepted for certain: written before the failed one on the same connection.
        var confirmed = 0
        /// The failed one (nil for a shutdown, which names the last good one).
        var failed: Entry?
        var status: ErrorStatus?
        /// Discarded by the gateway: to be written again, in this order, before anything new.
        var resend: [Entry] = []
        /// Written, then the connection ended with no word on them: accepted or not, nobody knows.
        var uncertain: [Entry] = []
        /// Recorded but never handed to the kernel before the connection ended: unsent for certain, so written
        /// again without counting as uncertain.
        var unsent: [Entry] = []
        /// The identifier named no entry in the window (it had already been presumed accepted, or the
        /// gateway named one this connection never wrote).
        var unknownIdentifier = false
        /// When the batch holding the named entry was written (0: unknown), for the answer's latency.
        var failedWrittenAt: UInt64 = 0
    }

    /// The row a barrier is journaled as (line -1; its token is not sent).
    static let barrierRow = TokenRow(token: try! DeviceToken(bytes: [UInt8](repeating: 0, count: 32)), line: -1)

    /// Its pages go back to the kernel as rows settle: what is resident follows what is in flight, not the capacity.
    private var rows: ReleasingRing<Journaled>
    /// Per written batch: the position after its last row (counted from the start of the connection), the
    /// ciphertext offsets around it, when the gateway had certainly read it (0: not yet), and when it was written
    /// (0: not said).
    private var batches:
        Deque<(end: Int, ciphertextStart: Int, ciphertextEnd: Int, consumedAt: UInt64, writtenAt: UInt64)> = []
    /// Batches before this index in `batches` are known to be read.
    private var consumedBatches = 0
    /// Position (from the start of the connection) of `rows.first`.
    private var head = 0
    /// Rows recorded but not yet in a batch start at this position.
    private var marked = 0
    /// The identifier of position 0.
    private var firstIdentifier: UInt32
    let capacity: Int
    /// Where confirmed and presumed rows are marked (`send --journal`), if anywhere.
    var journal: RowJournal?

    /// - Parameter firstIdentifier: where the sequence starts (tests start near the wrap).
    init(capacity: Int, firstIdentifier: UInt32 = 1) {
        precondition(capacity > 0 && capacity < 1 << 30, "a window holds between 1 and 2^30 entries")
        precondition(firstIdentifier != 0, "identifier 0 means 'unknown' to the gateway")
        self.capacity = capacity
        self.firstIdentifier = firstIdentifier
        // Mapped once, so the window never reallocates (and never holds two copies) while it fills; pages are
        // touched as rows arrive and handed back as they settle.
        // One more than the rows: a full window still takes the barrier that settles it.
        self.rows = ReleasingRing(capacity: capacity + 1)
    }

    /// Empties the window for a new connection (identifiers start again at 1), keeping its storage.
    mutating func restart() {
        precondition(self.rows.isEmpty, "settle the window before reusing it")
        self.clear()
        self.head = 0
        self.marked = 0
        self.firstIdentifier = 1
    }

    var count: Int { self.rows.count }
    var isEmpty: Bool { self.rows.isEmpty }
    var isFull: Bool { self.rows.count >= self.capacity }
    /// When the oldest unsettled batch was known to be read, if it was.
    var oldestConsumedAt: UInt64? { self.batches.first.flatMap { $0.consumedAt == 0 ? nil : $0.consumedAt } }

    // Identifiers run 1...UInt32.max and wrap to 1: a cycle of UInt32.max values.
    private static let cycle = UInt64(UInt32.max)

    private func identifier(at position: Int) -> UInt32 {
        UInt32((UInt64(self.firstIdentifier - 1) + UInt64(position)) % Self.cycle + 1)
    }

    /// The identifier the next recorded row gets.
    var nextIdentifier: UInt32 { self.identifier(at: self.head + self.rows.count) }

    /// Journals a row about to be encoded and returns its identifier.
    mutating func record(_ row: TokenRow) -> UInt32 {
        let identifier = self.nextIdentifier
        self.rows.append(Journaled(line: row.line, reference: row.reference))
        // Before it can go out: after a crash, a written row is uncertain.
        self.journal?.mark(file: row.reference.file, line: row.line, .written)
        return identifier
    }

    /// Closes the batch of every row recorded since the last call (call once per batch write).
    ///
    /// - Parameters:
    ///   - ciphertextStart: the connection's ciphertext offset before this batch.
    ///   - ciphertextEnd: the connection's ciphertext offset after this batch.
    ///   - writtenAt: when (monotonic nanoseconds; 0: not said).
    mutating func markWritten(ciphertextStart: Int, ciphertextEnd: Int, at writtenAt: UInt64 = 0) {
        let end = self.head + self.rows.count
        guard end > self.marked else { return }
        self.batches.append((end, ciphertextStart, ciphertextEnd, 0, writtenAt))
        self.marked = end
    }

    /// Notes that the gateway has read its stream up to `offset` (ciphertext): batches that end there or
    /// before are read as of `now`.
    mutating func observe(consumedThrough offset: Int, at now: UInt64) {
        precondition(now > 0, "0 means 'not yet read'")
        while self.consumedBatches < self.batches.count, self.batches[self.consumedBatches].ciphertextEnd <= offset {
            self.batches[self.consumedBatches].consumedAt = now
            self.consumedBatches += 1
        }
    }

    /// Removes the rows of batches the gateway had read at or before `deadline`: presumed accepted, as no
    /// error came for them in time. Stops at a barrier, which waits for its answer.
    ///
    /// - Returns: how many rows were presumed.
    mutating func presume(readBefore deadline: UInt64) -> Int {
        var presumed = 0
        while let batch = self.batches.first, batch.consumedAt != 0, batch.consumedAt <= deadline {
            while self.head < batch.end {
                if self.rows.first!.isBarrier { return presumed }
                let row = self.rows.removeFirst()
                self.journal?.mark(file: row.reference.file, line: row.line, .presumed)
                self.head += 1
                presumed += 1
            }
            self.batches.removeFirst()
            self.consumedBatches -= 1
        }
        return presumed
    }

    /// The position of `identifier` relative to the window's first row, if it is in the window.
    private func index(of identifier: UInt32) -> Int? {
        guard identifier != 0, !self.rows.isEmpty else { return nil }
        let headIdentifier = UInt64(self.identifier(at: self.head))
        let distance = (UInt64(identifier) + Self.cycle - headIdentifier) % Self.cycle
        return distance < UInt64(self.rows.count) ? Int(distance) : nil
    }

    /// The entries in `range`, their tokens read again through `resolve` (not for the barrier).
    private func entries<Failure: Error>(
        _ range: Range<Int>,
        resolve: (Journaled) throws(Failure) -> DeviceToken
    ) throws(Failure) -> [Entry] {
        var entries: [Entry] = []
        entries.reserveCapacity(range.count)
        for index in range {
            let journaled = self.rows[index]
            let token = journaled.isBarrier ? SentWindow.barrierRow.token : try resolve(journaled)
            entries.append(
                Entry(
                    row: TokenRow(token: token, line: journaled.line, reference: journaled.reference),
                    identifier: self.identifier(at: self.head + index)
                )
            )
        }
        return entries
    }

    /// How many rows (not the barrier) are in `range`.
    private func rowCount(_ range: Range<Int>) -> Int {
        guard let last = range.last else { return 0 }
        // A barrier is always the last entry written.
        return self.rows[last].isBarrier ? range.count - 1 : range.count
    }

    /// Applies an error response. Everything is settled and the window is empty afterwards: the gateway
    /// closes the connection after answering.
    ///
    /// - Status 10 (shutdown): the identifier is the last accepted one; those up to it are confirmed and
    ///   the rest are resent.
    /// - Any other status: the named entry failed; those before it are confirmed, those after it resent.
    /// - Identifier 0 (the gateway cannot tell which): every entry is uncertain.
    /// - An identifier not in the window: nothing can be confirmed; everything is resent (the failed one,
    ///   if it existed, was already presumed accepted).
    ///
    /// - Parameter resolve: reads a row's token again (for the failed, resent and uncertain rows only).
    mutating func apply<Failure: Error>(
        _ response: ErrorResponse,
        resolve: (Journaled) throws(Failure) -> DeviceToken
    ) throws(Failure) -> Settlement {
        var settlement = Settlement()
        settlement.status = response.status
        let count = self.rows.count
        if let index = self.index(of: response.identifier) {
            let cut = response.status == .shutdown ? index + 1 : index
            settlement.confirmed = self.rowCount(0..<cut)
            if let journal = self.journal {
                for index in 0..<cut where !self.rows[index].isBarrier {
                    let row = self.rows[index]
                    journal.mark(file: row.reference.file, line: row.line, .confirmed)
                }
            }
            if response.status != .shutdown {
                settlement.failed = try self.entries(index..<(index + 1), resolve: resolve).first
            }
            let position = self.head + index
            settlement.failedWrittenAt = self.batches.first { $0.end > position }?.writtenAt ?? 0
            settlement.resend = try self.entries((index + 1)..<count, resolve: resolve)
        } else {
            settlement.unknownIdentifier = true
            if response.identifier == 0 {
                settlement.uncertain = try self.entries(0..<count, resolve: resolve)
            } else {
                settlement.resend = try self.entries(0..<count, resolve: resolve)
            }
        }
        self.clear()
        return settlement
    }

    /// The connection ended with no error response. Entries whose batch never reached the kernel (it starts at
    /// or after `sentThrough`, the ciphertext handed to the kernel) and entries recorded but never written are
    /// unsent for certain; every other entry is uncertain.
    mutating func abandon<Failure: Error>(
        sentThrough: Int,
        resolve: (Journaled) throws(Failure) -> DeviceToken
    ) throws(Failure) -> Settlement {
        // Positions of the batches run in order from `head`; the first batch that did not reach the kernel
        // starts where the one before it ended.
        var firstUnsent = self.marked
        var start = self.head
        for batch in self.batches {
            if batch.ciphertextStart >= sentThrough {
                firstUnsent = start
                break
            }
            start = batch.end
        }
        let cut = firstUnsent - self.head
        var settlement = Settlement()
        settlement.uncertain = try self.entries(0..<cut, resolve: resolve)
        settlement.unsent = try self.entries(cut..<self.rows.count, resolve: resolve)
        self.clear()
        return settlement
    }

    private mutating func clear() {
        self.head += self.rows.count
        self.marked = self.head
        self.rows.removeAll()
        self.batches.removeAll(keepingCapacity: true)
        self.consumedBatches = 0
    }
}
