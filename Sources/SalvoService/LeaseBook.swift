/// The leases of the rows a worker of a shared store holds, and what its sending job may still do with each: the one
/// place that decides, from the claims and renewals the store answered and the time, which rows may be written.
/// A value with the time given (milliseconds since 1970, the clock the store's leases are written in).
///
/// A row is the worker's from its claim until its lease ends (`lease` after the claim or the last renewal that found
/// it held). The job asks before writing each row (`withheld`), a first send or a resend alike:
/// - a row another worker took over (a renewal found it no longer held) is **lost**: never written again. Lost before
///   it was written, it is taken out of the sending without ever reaching the push service; lost after, its answer
///   is dropped and the new holder counts it uncertain, as a row whose worker died.
/// - a row whose lease is about to end (within `margin`) without a renewal that found it held has **lapsed**: not
///   written, given back to the store as never written (queued again if this worker still holds it; refused if
///   another took it over). A worker stalled past its lease (stopped, cut off from the database) therefore writes
///   none of its rows when it wakes, whoever holds them by then.
///
/// Rows are named by the job's line (`ServiceMarks.line`), with their sequence number kept beside.
public struct LeaseBook: Sendable {
    /// How long a claim or a renewal keeps a row, in milliseconds.
    public let lease: Int64
    /// How long before its lease ends a row is no longer written, in milliseconds: room for the time between the
    /// check and the write, and for clocks that differ between workers.
    public let margin: Int64

    struct Row: Hashable, Sendable {
        var seq: Int
        /// This book's own number for the claim, so that a row claimed again is not judged by an older renewal.
        var claim: UInt64
        /// When its lease ends.
        var until: Int64
        /// Handed to a connection at least once.
        var written = false
        /// Another worker holds it now.
        var lost = false
        /// Its outcome is on its way to the store: a renewal that misses it proves nothing.
        var settling = false
    }

    private(set) var rows: [Int: Row] = [:]
    private var claims: UInt64 = 0
    /// Rows withheld so far because their lease was about to end (each given back once).
    public private(set) var lapsed = 0
    /// The rows handed to a connection whose outcome is not on its way yet: the earliest end of their leases, and
    /// whether one of them is lost; worked out again after a change that may raise it (`watchIsStale`), so that the
    /// question asked at every flush (`mayHaveLostAWrittenRow`) costs no walk of the rows.
    private var earliestWrittenUntil = Int64.max
    private var writtenLost = false
    private var watchIsStale = false

    /// - Parameter lease: the store's lease; the margin is a quarter of it.
    public init(lease: Duration) {
        let milliseconds = lease.components.seconds * 1000 + lease.components.attoseconds / 1_000_000_000_000_000
        self.lease = max(1, milliseconds)
        self.margin = self.lease / 4
    }

    /// Rows the worker holds.
    public var count: Int { self.rows.count }

    /// Rows known to be lost and not yet given back by the job.
    public var lostCount: Int { self.rows.values.filter(\.lost).count }

    // MARK: What the store answered

    /// Rows claimed by a cycle written at `now`: the worker's until `now + lease`.
    public mutating func claimed(_ seqs: [Int], at now: Int64) {
        self.watchIsStale = true
        for seq in seqs {
            self.claims &+= 1
            self.rows[ServiceMarks.line(seq)] = Row(seq: seq, claim: self.claims, until: now + self.lease)
        }
    }

    /// Rows whose outcome the writer took for its next cycle.
    public mutating func settling(_ seqs: [Int]) {
        self.watchIsStale = true
        for seq in seqs {
            let line = ServiceMarks.line(seq)
            if self.rows[line]?.seq == seq { self.rows[line]?.settling = true }
        }
    }

    /// Rows whose outcome a cycle committed (final, queued again) or refused (fenced): no longer held.
    public mutating func settled(_ seqs: [Int]) {
        self.watchIsStale = true
        for seq in seqs {
            let line = ServiceMarks.line(seq)
            if self.rows[line]?.seq == seq { self.rows[line] = nil }
        }
    }

    /// A renewal to ask for: the rows to renew, and those its answer judges, each by its claim.
    public struct Ticket: Sendable {
        /// Every row held and not lost, by sequence number: the store renews these and no other (a row the worker
        /// holds in the database without knowing it, from a commit whose answer was lost, is left to run out and be
        /// taken over).
        public var seqs: Set<Int>
        var claims: [Int: UInt64]
    }

    /// Taken right before the store is asked to renew: only rows claimed before it, and whose outcome is not on its
    /// way, are judged by its answer (a row claimed or settled meanwhile may be missing from it without being lost).
    public func renewalStarted() -> Ticket {
        var seqs: Set<Int> = []
        var claims: [Int: UInt64] = [:]
        seqs.reserveCapacity(self.rows.count)
        claims.reserveCapacity(self.rows.count)
        for (line, row) in self.rows where !row.lost {
            seqs.insert(row.seq)
            if !row.settling { claims[line] = row.claim }
        }
        return Ticket(seqs: seqs, claims: claims)
    }

    /// The store renewed, until `until`, the leases of the rows this worker still holds (`held`, by sequence number):
    /// those of the ticket's rows it found are extended, the others are lost.
    public mutating func renewed(_ ticket: Ticket, held: Set<Int>, until: Int64) -> LeaseLoss {
        var loss = LeaseLoss()
        self.watchIsStale = true
        for (line, claim) in ticket.claims {
            guard var row = self.rows[line], row.claim == claim, !row.settling, !row.lost else { continue }
            if held.contains(row.seq) {
                row.until = max(row.until, until)
            } else {
                row.lost = true
                if row.written { loss.written.append(row.seq) } else { loss.unwritten.append(row.seq) }
            }
            self.rows[line] = row
        }
        loss.written.sort()
        loss.unwritten.sort()
        return loss
    }

    // MARK: What the job asks

    /// Of the rows with these lines about to be written at `now`, those that must not be: lost or lapsed. The others
    /// count as written from now on. A line the book does not hold is let through (a store without leases).
    public mutating func withheld(_ lines: [Int], now: Int64) -> Set<Int> {
        var withheld: Set<Int> = []
        for line in lines {
            guard var row = self.rows[line] else { continue }
            if row.lost {
                withheld.insert(line)
            } else if now >= row.until - self.margin {
                withheld.insert(line)
                self.lapsed += 1
            } else if !row.written {
                row.written = true
                self.rows[line] = row
                self.earliestWrittenUntil = min(self.earliestWrittenUntil, row.until)
            }
        }
        return withheld
    }

    /// Whether a row handed to a connection, its outcome not yet on its way, may be another worker's by `now`: lost,
    /// or its lease within the margin of its end. Then no byte of the job's connections may leave
    /// (`HTTP2WriteGate.forbidsEveryWrite`): the row's frames may still wait in one, behind HTTP/2's flow-control
    /// window or the event loop's next turn, and a worker that wakes from a stall past its lease would send them
    /// after another worker took the row over. Asked at every flush: no walk of the rows unless one changed.
    public mutating func mayHaveLostAWrittenRow(now: Int64) -> Bool {
        if self.watchIsStale {
            self.earliestWrittenUntil = Int64.max
            self.writtenLost = false
            for row in self.rows.values where row.written && !row.settling {
                if row.lost {
                    self.writtenLost = true
                } else {
                    self.earliestWrittenUntil = min(self.earliestWrittenUntil, row.until)
                }
            }
            self.watchIsStale = false
        }
        return self.writtenLost || now >= self.earliestWrittenUntil - self.margin
    }

    /// The job gave back the row with this line (answered, or never written).
    /// - Returns: its sequence number when the row is lost: its outcome is not this worker's to record (it is
    ///   dropped, and the row leaves the book); nil otherwise.
    public mutating func gaveBack(line: Int) -> Int? {
        guard let row = self.rows[line], row.lost else { return nil }
        self.rows[line] = nil
        self.watchIsStale = true
        return row.seq
    }
}

/// The rows a renewal found taken over by another worker.
public struct LeaseLoss: Hashable, Sendable {
    /// Never written here: taken out of the sending, so they are written by their new holder alone.
    public var unwritten: [Int] = []
    /// Written here at least once: their answers are dropped; the new holder counts them uncertain.
    public var written: [Int] = []

    public init() {}

    public var isEmpty: Bool { self.unwritten.isEmpty && self.written.isEmpty }
}
