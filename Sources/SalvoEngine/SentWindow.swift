import APNSWire
import DequeModule

/// The notifications written on one connection and not yet settled, in the order they were written.
///
/// The binary gateway never acknowledges a notification; it answers only a failure, with the failed
/// notification's identifier, and then discards everything written after it on that connection. So each
/// connection journals what it wrote: identifiers are a per-connection sequence (1, 2, 3, …, skipping 0,
/// which gateways use when they cannot tell which notification failed), and an identifier finds its entry
/// by arithmetic, not by search. An entry leaves the window when the gateway's answer settles it, or when
/// it has been on a live connection longer than the settle time (it is then presumed accepted).
///
/// A pure value: the shard that owns the connection applies what the gateway says and carries out the
/// resulting `Settlement`. Bounded: the owner stops writing while `isFull`.
struct SentWindow {
    /// One written notification.
    struct Entry: Hashable {
        var row: TokenRow
        var identifier: UInt32
        /// When it was written, on the owner's clock (nanoseconds).
        var sentAt: UInt64
        /// How many earlier tries ended in a processing error (status 1).
        var processingErrors: UInt8
        /// The end-of-job barrier, not a row.
        var isBarrier: Bool
    }

    /// What an answer from the gateway (or its silence) decided.
    struct Settlement: Equatable {
        /// Accepted for certain: written before the failed one on the same connection.
        var confirmed: [Entry] = []
        /// The failed one, with its status (nil for a shutdown, which names the last good one).
        var failed: Entry?
        var status: ErrorStatus?
        /// Discarded by the gateway: to be written again, in this order, before anything new.
        var resend: [Entry] = []
        /// Written, then the connection ended with no word on them: accepted or not, nobody knows.
        var uncertain: [Entry] = []
        /// The identifier named no entry in the window (it had already been presumed accepted, or the
        /// gateway named one this connection never wrote).
        var unknownIdentifier = false
    }

    private var entries: Deque<Entry> = []
    private(set) var nextIdentifier: UInt32 = 1
    let capacity: Int

    /// - Parameter firstIdentifier: where the sequence starts (tests start near the wrap).
    init(capacity: Int, firstIdentifier: UInt32 = 1) {
        precondition(capacity > 0 && capacity < 1 << 30, "a window holds between 1 and 2^30 entries")
        precondition(firstIdentifier != 0, "identifier 0 means 'unknown' to the gateway")
        self.capacity = capacity
        self.nextIdentifier = firstIdentifier
        self.entries.reserveCapacity(capacity)
    }

    var count: Int { self.entries.count }
    var isEmpty: Bool { self.entries.isEmpty }
    var isFull: Bool { self.entries.count >= self.capacity }
    /// The oldest unsettled entry's write time.
    var oldestSentAt: UInt64? { self.entries.first?.sentAt }

    /// Journals a notification about to be written and returns its identifier.
    mutating func record(
        _ row: TokenRow,
        at now: UInt64,
        processingErrors: UInt8 = 0,
        isBarrier: Bool = false
    )
        -> UInt32
    {
        let identifier = self.nextIdentifier
        self.nextIdentifier = identifier == UInt32.max ? 1 : identifier + 1
        self.entries.append(
            Entry(
                row: row,
                identifier: identifier,
                sentAt: now,
                processingErrors: processingErrors,
                isBarrier: isBarrier
            )
        )
        return identifier
    }

    /// Removes and returns the entries written at or before `deadline`: presumed accepted, as no error
    /// came for them in time. A barrier is never presumed.
    mutating func presume(writtenBefore deadline: UInt64) -> [Entry] {
        var presumed: [Entry] = []
        while let first = self.entries.first, first.sentAt <= deadline, !first.isBarrier {
            presumed.append(self.entries.removeFirst())
        }
        return presumed
    }

    /// The position of `identifier` in the window, if it is there.
    private func index(of identifier: UInt32) -> Int? {
        guard identifier != 0, let first = self.entries.first?.identifier else { return nil }
        var distance = Int(identifier &- first)
        // Identifiers skip 0 when they wrap, so a range that crosses the wrap is one shorter.
        if identifier < first { distance -= 1 }
        guard distance >= 0, distance < self.entries.count, self.entries[distance].identifier == identifier else {
            return nil
        }
        return distance
    }

    /// Applies an error response: everything is settled, and the window is empty afterwards (the gateway
    /// closes the connection after answering).
    ///
    /// - Status 10 (shutdown): the identifier is the last accepted one; those up to it are confirmed and
    ///   the rest are resent.
    /// - Any other status: the named entry failed; those before it are confirmed, those after it resent.
    /// - An identifier not in the window: nothing can be confirmed; everything is resent (the failed one,
    ///   if it existed, was already presumed accepted).
    mutating func apply(_ response: ErrorResponse) -> Settlement {
        var settlement = Settlement()
        settlement.status = response.status
        guard let index = self.index(of: response.identifier) else {
            settlement.unknownIdentifier = true
            if response.identifier == 0 {
                // The gateway could not tell which one failed: nobody knows what was accepted.
                settlement.uncertain = Array(self.entries)
            } else {
                settlement.resend = Array(self.entries)
            }
            self.entries.removeAll(keepingCapacity: true)
            return settlement
        }
        if response.status == .shutdown {
            settlement.confirmed = Array(self.entries[...index])
            settlement.resend = Array(self.entries[(index + 1)...])
        } else {
            settlement.confirmed = Array(self.entries[..<index])
            settlement.failed = self.entries[index]
            settlement.resend = Array(self.entries[(index + 1)...])
        }
        self.entries.removeAll(keepingCapacity: true)
        return settlement
    }

    /// The connection ended with no error response: every entry is uncertain.
    mutating func abandon() -> Settlement {
        var settlement = Settlement()
        settlement.uncertain = Array(self.entries)
        self.entries.removeAll(keepingCapacity: true)
        return settlement
    }
}
