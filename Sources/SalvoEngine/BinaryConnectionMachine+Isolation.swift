import APNSWire
import DequeModule

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
        var probeWritten = false
        /// Connections the single remaining suspect dropped, alone.
        var soloDrops = 0
    }

    /// A connection ended with no answer (`dropped`: the gateway ended it). Rows written on it that were already
    /// suspects, or that the connection before left and this one did not settle, become (or stay) isolated: taken
    /// out of `settlement`, they wait in `isolation` instead of the queue. Only with the resend policy (otherwise a
    /// dropped row is left uncertain at once and never rides another connection).
    mutating func suspect(_ settlement: inout SentWindow.Settlement, dropped: Bool, presumedHere: Int) {
        let uncertain = settlement.uncertain.filter { !$0.isBarrier }.map(\.row)
        if var isolation = self.isolation {
            guard isolation.probeWritten else { return }
            let probe = uncertain + settlement.unsent.filter { !$0.isBarrier }.map(\.row)
            settlement.uncertain = []
            settlement.unsent = []
            isolation.probeWritten = false
            guard dropped, !uncertain.isEmpty else {
                // No verdict (the probe never reached the gateway, or we left it): probed again.
                isolation.suspects.prepend(contentsOf: probe)
                self.isolation = isolation
                return
            }
            // The probe dropped the connection: it holds the culprit; the untested rest goes back to the queue.
            self.pending.prepend(contentsOf: isolation.suspects)
            isolation.suspects = Deque(probe)
            isolation.soloDrops = probe.count == 1 ? isolation.soloDrops + 1 : 0
            if probe.count == 1 && isolation.soloDrops >= Self.poisonDrops {
                self.outcomes.connectionDropped(probe[0])
                self.isolation = nil
                return
            }
            _ = self.outcomes.uncertain(uncertain.count)
            self.isolation = isolation
            return
        }
        guard dropped, self.configuration.onUncertain == .resend, !uncertain.isEmpty else {
            self.carried = 0
            return
        }
        // The rows the last drop left were written first here, and presumed in order.
        let overlap = min(max(self.carried - presumedHere, 0), uncertain.count)
        guard overlap > 0 else {
            self.carried = uncertain.count
            return
        }
        self.carried = 0
        _ = self.outcomes.uncertain(overlap)
        self.isolation = Isolation(suspects: Deque(uncertain.prefix(overlap)))
        settlement.uncertain = Array(settlement.uncertain.filter { !$0.isBarrier }.dropFirst(overlap))
    }

    /// Writes while rows are isolated: the probe (the first half of the suspects) alone, then, for commands 1 and 2,
    /// the barrier whose answer proves it; command 0 waits for it to be presumed.
    mutating func writeProbe(_ open: inout Open, now: UInt64, encode: (TokenRow, UInt32) -> Int) -> Action {
        guard var isolation = self.isolation else { return .none }
        if !isolation.probeWritten {
            let count = (isolation.suspects.count + 1) / 2
            for _ in 0..<count {
                let row = isolation.suspects.removeFirst()
                let size = encode(row, self.window.record(row))
                if open.unflushedSince == nil { open.unflushedSince = now }
                open.unflushedBytes += size
                open.unflushedRows += 1
            }
            isolation.probeWritten = true
            self.isolation = isolation
            return .flush
        }
        if open.unflushedBytes > 0 { return .flush }
        guard self.configuration.command != .simple, !self.window.isEmpty else { return .none }
        open.barrierWritten = true
        open.barrierAt = now
        return .writeBarrier(identifier: self.window.record(SentWindow.barrierRow))
    }

    /// The probe settled without dropping the connection: its rows are cleared, the rest of the suspects are
    /// probed next (none left: the drops were not theirs, and isolation ends).
    mutating func probeSettled() {
        guard var isolation = self.isolation, isolation.probeWritten, self.window.isEmpty else { return }
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
