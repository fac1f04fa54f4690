import APNSWire
import DequeModule
import SalvoRows

/// Rows that drop connections: found by bisection, left uncertain after a bound.
extension BinaryConnectionMachine {
    /// Rows suspected of making the gateway drop connections without an answer (command 0 has no error response;
    /// a row the gateway cannot take ends the connection, and resending it would end every connection after),
    /// being bisected: the first half of the suspects goes alone on a connection (`probeWritten`) and settles
    /// (commands 1 and 2: the barrier's answer; command 0: presumed) — the rest are the suspects — or drops the
    /// connection — it is the suspects, and the rest go back to the queue. A single row that drops the connection
    /// `poisonDrops` times alone is left uncertain (`connectionDropped`), never sent again.
    struct Isolation: Equatable {
        var suspects: Deque<TokenRow>
        /// The probe is on the current connection (its rows leave `suspects` as they are written).
        var probeWritten = false
        /// Rows of the probe not written yet: a probe is written in batches, like any rows, within the flush size
        /// and the connection's queue limit.
        var probeUnwritten = 0
        /// Connections the single remaining suspect dropped, alone.
        var soloDrops = 0
    }

    /// A connection ended with no answer (`dropped`: the gateway ended it). Rows written on it that were already
    /// suspects, or that the connection before left and this one did not settle, become (or stay) isolated: taken
    /// out of `settlement`, they wait in `isolation` instead of the queue. Only with the resend policy (otherwise a
    /// dropped row is left uncertain at once and never rides another connection).
    ///
    /// While a probe is out, `settlement` counts as written only what the gateway's TCP acknowledged (see
    /// `closed`): a drop says something of the rows the gateway received, and nothing of rows a reset kept from it.
    ///
    /// - Returns: whether the drop narrowed the suspects (a verdict on the probe): such a drop is what the
    ///   bisection asks for, so it does not lengthen the backoff.
    mutating func suspect(
        _ settlement: inout SentWindow.Settlement,
        dropped: Bool,
        presumedHere: Int
    ) -> Bool {
        let uncertain = settlement.uncertain.filter { !$0.isBarrier }.map(\.row)
        if var isolation = self.isolation {
            guard isolation.probeWritten else { return false }
            let probe = uncertain + settlement.unsent.filter { !$0.isBarrier }.map(\.row)
            settlement.uncertain = []
            settlement.unsent = []
            isolation.probeWritten = false
            isolation.probeUnwritten = 0
            guard dropped, !uncertain.isEmpty else {
                // No verdict (the probe never reached the gateway, or we left it): probed again.
                isolation.suspects.prepend(contentsOf: probe)
                self.isolation = isolation
                return false
            }
            // The probe's rows the gateway received dropped the connection: they hold the culprit. The untested
            // rest (what it did not receive, the probe's rows not written yet, the other suspects) goes back to the
            // queue.
            self.pending.prepend(contentsOf: isolation.suspects)
            self.pending.prepend(contentsOf: probe.dropFirst(uncertain.count))
            isolation.suspects = Deque(uncertain)
            isolation.soloDrops = uncertain.count == 1 ? isolation.soloDrops + 1 : 0
            if uncertain.count == 1 && isolation.soloDrops >= Self.poisonDrops {
                self.outcomes.connectionDropped(uncertain[0])
                self.isolation = nil
                return true
            }
            _ = self.outcomes.uncertain(uncertain.count)
            self.isolation = isolation
            return true
        }
        guard dropped, self.configuration.onUncertain == .resend else {
            self.carried = 0
            return false
        }
        // A connection that dropped before the rows it inherited reached the gateway says nothing of them: they are
        // back at the front of the queue, still carried.
        guard !uncertain.isEmpty else { return false }
        // The rows the last drop left were written first here, and presumed in order.
        let overlap = min(max(self.carried - presumedHere, 0), uncertain.count)
        guard overlap > 0 else {
            self.carried = uncertain.count
            return false
        }
        self.carried = 0
        _ = self.outcomes.uncertain(overlap)
        self.isolation = Isolation(suspects: Deque(uncertain.prefix(overlap)))
        settlement.uncertain = Array(settlement.uncertain.filter { !$0.isBarrier }.dropFirst(overlap))
        return false
    }

    /// Writes while rows are isolated: the probe (the first half of the suspects) alone, in batches of the flush
    /// size while the connection's queue takes them, then, for commands 1 and 2, the barrier whose answer proves
    /// it; command 0 waits for it to be presumed.
    mutating func writeProbe(
        _ open: inout Open,
        queuedBytes: Int,
        now: UInt64,
        encode: (TokenRow, UInt32) -> Int
    ) -> Action {
        guard var isolation = self.isolation else { return .none }
        if !isolation.probeWritten {
            isolation.probeWritten = true
            isolation.probeUnwritten = (isolation.suspects.count + 1) / 2
        }
        if isolation.probeUnwritten > 0 {
            guard open.unflushedBytes == 0 else {
                self.isolation = isolation
                return .flush
            }
            // The connection's `onWritable` asks again once its queue drains.
            guard queuedBytes < self.configuration.queueLimitBytes else {
                self.isolation = isolation
                return .none
            }
            while isolation.probeUnwritten > 0 && open.unflushedBytes < self.configuration.flush.bytes {
                let row = isolation.suspects.removeFirst()
                isolation.probeUnwritten -= 1
                let size = encode(row, self.window.record(row))
                if open.unflushedSince == nil { open.unflushedSince = now }
                open.unflushedBytes += size
                open.unflushedRows += 1
            }
            self.isolation = isolation
            return .flush
        }
        self.isolation = isolation
        if open.unflushedBytes > 0 { return .flush }
        guard self.configuration.command != .simple, !self.window.isEmpty else { return .none }
        open.barrierWritten = true
        open.barrierAt = now
        return .writeBarrier(identifier: self.window.record(SentWindow.barrierRow))
    }

    /// The probe settled without dropping the connection: its rows are cleared, the rest of the suspects are
    /// probed next (none left: the drops were not theirs, and isolation ends).
    mutating func probeSettled() {
        guard var isolation = self.isolation, isolation.probeWritten, isolation.probeUnwritten == 0,
            self.window.isEmpty
        else { return }
        isolation.probeWritten = false
        isolation.soloDrops = 0
        self.isolation = isolation.suspects.isEmpty ? nil : isolation
    }

    /// Suspects waiting for their probe were written before, with no answer: unanswered when the job stops.
    mutating func leaveSuspects() {
        guard let isolation = self.isolation else { return }
        for row in isolation.suspects { self.outcomes.leave(row, .unanswered) }
        self.isolation = nil
    }
}
