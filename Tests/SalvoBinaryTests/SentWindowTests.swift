import APNSWire
import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

/// Row `index`: line `index + 2`, token `token(index)`, found at file offset `index`.
private func row(_ index: Int) -> TokenRow {
    TokenRow(token: token(UInt8(index)), line: index + 2, reference: RowReference(file: 0, offset: index))
}

/// Reads a journaled row's token "again", as the token source would.
private func resolve(_ journaled: SentWindow.Journaled) -> DeviceToken {
    token(UInt8(journaled.reference.offset))
}

@Suite(.tags(.pure), .runs(.pure)) struct SentWindowTests {
    /// A window with `rows` rows (lines 2, 3, …), one batch per row of 100 ciphertext bytes, the gateway
    /// having read row i at time 10 + i.
    private func window(rows: Int, capacity: Int = 100, startingAt first: UInt32 = 1) -> SentWindow {
        var window = SentWindow(capacity: capacity, firstIdentifier: first)
        for index in 0..<rows {
            _ = window.record(row(index))
            window.markWritten(ciphertextStart: 100 * index, ciphertextEnd: 100 * (index + 1))
            window.observe(consumedThrough: 100 * (index + 1), at: UInt64(10 + index))
        }
        return window
    }

    @Test func identifiersCountFromOne() {
        var window = SentWindow(capacity: 4)
        #expect(window.record(TokenRow(token: token(1), line: 2)) == 1)
        #expect(window.record(TokenRow(token: token(2), line: 3)) == 2)
        #expect(window.count == 2)
    }

    @Test func anErrorConfirmsBeforeFailsAtAndResendsAfter() {
        var window = self.window(rows: 10)
        let settlement = window.apply(ErrorResponse(status: .invalidToken, identifier: 4), resolve: resolve)
        #expect(settlement.confirmed == 3)
        #expect(settlement.failed?.identifier == 4)
        #expect(settlement.failed?.row.token == token(3), "the failed row's token is read again")
        #expect(settlement.failed?.row.line == 5)
        #expect(settlement.status == .invalidToken)
        #expect(settlement.resend.map(\.identifier) == [5, 6, 7, 8, 9, 10])
        #expect(settlement.resend.map(\.row.line) == [6, 7, 8, 9, 10, 11], "resent in their original order")
        #expect(window.isEmpty)
    }

    @Test func shutdownNamesTheLastGoodOne() {
        var window = self.window(rows: 5)
        let settlement = window.apply(ErrorResponse(status: .shutdown, identifier: 3), resolve: resolve)
        #expect(settlement.confirmed == 3)
        #expect(settlement.failed == nil)
        #expect(settlement.resend.map(\.identifier) == [4, 5])
    }

    @Test func errorOnTheFirstAndLastEntries() {
        var first = self.window(rows: 3)
        let atFirst = first.apply(ErrorResponse(status: .invalidToken, identifier: 1), resolve: resolve)
        #expect(atFirst.confirmed == 0 && atFirst.failed?.identifier == 1 && atFirst.resend.count == 2)
        var last = self.window(rows: 3)
        let atLast = last.apply(ErrorResponse(status: .invalidToken, identifier: 3), resolve: resolve)
        #expect(atLast.confirmed == 2 && atLast.failed?.identifier == 3 && atLast.resend.isEmpty)
    }

    @Test func identifierZeroLeavesEverythingUncertain() {
        var window = self.window(rows: 4)
        let settlement = window.apply(ErrorResponse(status: .unknown, identifier: 0), resolve: resolve)
        #expect(settlement.unknownIdentifier)
        #expect(settlement.uncertain.count == 4)
        #expect(settlement.confirmed == 0 && settlement.resend.isEmpty)
    }

    @Test func anIdentifierOutsideTheWindowResendsEverything() {
        var window = self.window(rows: 4)
        #expect(window.presume(readBefore: 11) == 2)  // identifiers 1 and 2 leave the window
        let settlement = window.apply(ErrorResponse(status: .invalidToken, identifier: 2), resolve: resolve)
        #expect(settlement.unknownIdentifier)
        #expect(settlement.resend.map(\.identifier) == [3, 4])
        var other = self.window(rows: 4)
        #expect(other.apply(ErrorResponse(status: .invalidToken, identifier: 99), resolve: resolve).resend.count == 4)
    }

    @Test func identifiersContinueAfterPresumptionAndSettlement() {
        var window = self.window(rows: 3)
        #expect(window.presume(readBefore: 100) == 3)
        #expect(window.record(row(7)) == 4)
        window.markWritten(ciphertextStart: 0, ciphertextEnd: 400)
        let settlement = window.apply(ErrorResponse(status: .invalidToken, identifier: 4), resolve: resolve)
        #expect(settlement.failed?.row.line == 9)
        #expect(settlement.failed?.row.token == token(7))
    }

    @Test func presumesOnlyBatchesReadLongEnoughAgoAndNeverABarrier() {
        var window = SentWindow(capacity: 100)
        for index in 0...2 { _ = window.record(row(index)) }
        window.markWritten(ciphertextStart: 0, ciphertextEnd: 1000)
        for index in 3...4 { _ = window.record(row(index)) }
        #expect(window.presume(readBefore: 1000) == 0, "written is not read")
        window.observe(consumedThrough: 999, at: 5)
        #expect(window.presume(readBefore: 1000) == 0, "a batch is read only to its last byte")
        window.observe(consumedThrough: 5000, at: 10)
        #expect(window.oldestConsumedAt == 10)
        #expect(window.presume(readBefore: 9) == 0, "read too recently")
        #expect(window.presume(readBefore: 10) == 3, "rows not yet written are never presumed")
        window.markWritten(ciphertextStart: 0, ciphertextEnd: 2000)
        window.observe(consumedThrough: 5000, at: 20)
        #expect(window.presume(readBefore: 19) == 0)
        #expect(window.oldestConsumedAt == 20)
        _ = window.record(SentWindow.barrierRow)
        _ = window.record(row(7))
        window.markWritten(ciphertextStart: 0, ciphertextEnd: 3000)
        window.observe(consumedThrough: 5000, at: 30)
        #expect(window.presume(readBefore: 100) == 2)
        #expect(window.count == 2, "the barrier waits for its answer, and so does what follows it")
        let settlement = window.apply(ErrorResponse(status: .missingDeviceToken, identifier: 6), resolve: resolve)
        #expect(settlement.failed?.isBarrier == true)
    }

    @Test func identifiersWrapAroundSkippingZero() {
        var window = SentWindow(capacity: 10, firstIdentifier: UInt32.max - 1)
        var identifiers: [UInt32] = []
        for index in 0..<4 {
            identifiers.append(window.record(row(index)))
        }
        #expect(identifiers == [UInt32.max - 1, UInt32.max, 1, 2])
        // An error naming the entry after the wrap finds it by arithmetic.
        let settlement = window.apply(ErrorResponse(status: .invalidToken, identifier: 1), resolve: resolve)
        #expect(settlement.confirmed == 2)
        #expect(settlement.failed?.row.line == 4)
        #expect(settlement.resend.map(\.identifier) == [2])
    }

    @Test func abandonLeavesEverythingUncertain() {
        var window = self.window(rows: 3)
        #expect(window.abandon(sentThrough: .max, resolve: resolve).uncertain.map(\.identifier) == [1, 2, 3])
        #expect(window.isEmpty)
    }

    @Test func abandonTellsRowsThatNeverLeftTheProcessFromRowsThatDid() {
        var window = self.window(rows: 4)
        // A fifth row encoded but not yet flushed when the connection died.
        _ = window.record(row(4))
        // The kernel took 250 bytes: rows 1 and 2 entirely, row 3 in part; row 4's batch starts at 300.
        let settlement = window.abandon(sentThrough: 250, resolve: resolve)
        #expect(settlement.uncertain.map(\.identifier) == [1, 2, 3])
        #expect(settlement.unsent.map(\.identifier) == [4, 5])
        #expect(settlement.unsent.map(\.row.line) == [5, 6])
        #expect(window.isEmpty)
    }

    @Test func abandonWithNothingSentLeavesNothingUncertain() {
        var window = self.window(rows: 2)
        let settlement = window.abandon(sentThrough: 0, resolve: resolve)
        #expect(settlement.uncertain.isEmpty)
        #expect(settlement.unsent.count == 2)
    }

    @Test func reportsWhenFull() {
        let window = self.window(rows: 3, capacity: 3)
        #expect(window.isFull)
    }
}

@Suite(.tags(.pure), .runs(.pure)) struct PolicyTests {
    @Test func flushesOnSizeOrAge() {
        let policy = FlushPolicy(bytes: 1000, delay: .nanoseconds(500))
        #expect(!policy.shouldFlush(pendingBytes: 0, oldestPendingAt: nil, now: 10_000))
        #expect(!policy.shouldFlush(pendingBytes: 999, oldestPendingAt: 100, now: 599))
        #expect(policy.shouldFlush(pendingBytes: 1000, oldestPendingAt: 100, now: 100))
        #expect(policy.shouldFlush(pendingBytes: 1, oldestPendingAt: 100, now: 600))
        #expect(policy.delayUntilDue(oldestPendingAt: 100, now: 350) == 250)
        #expect(policy.delayUntilDue(oldestPendingAt: 100, now: 700) == 0)
        #expect(policy.delayUntilDue(oldestPendingAt: nil, now: 700) == nil)
    }

    @Test func backoffGrowsIsCappedAndKeepsTheFloor() {
        let policy = ReconnectPolicy(
            initialDelay: .nanoseconds(100),
            maximumDelay: .nanoseconds(1000),
            minimumInterval: .nanoseconds(50),
            maximumAttempts: 5
        )
        // With the jitter at its top, the ceiling shows: 100, 200, 400, 800, 1000, 1000.
        let ceilings = (1...6).map { policy.delay(failures: $0, sinceLastConnect: 1_000_000, random: 0.999_999_9) }
        #expect(ceilings.map { ($0 + 1) / 10 * 10 } == [100, 200, 400, 800, 1000, 1000])
        // Full jitter: anywhere from 0 up to the ceiling, but never under the floor.
        #expect(policy.delay(failures: 3, sinceLastConnect: 1_000_000, random: 0.5) == 200)
        #expect(policy.delay(failures: 3, sinceLastConnect: 10, random: 0) == 40)
        #expect(policy.delay(failures: 0, sinceLastConnect: 10, random: 0.9) == 40)
        #expect(policy.delay(failures: 0, sinceLastConnect: 60, random: 0.9) == 0)
        #expect(policy.givesUp(after: 5, sinceProgress: 0) && !policy.givesUp(after: 4, sinceProgress: 0))
        #expect(policy.delay(failures: 200, sinceLastConnect: 1_000_000, random: 0.999_999_9) <= 1000)
    }

    /// A gateway that is gone is given up on at the deadline (`giveUpAfter` after the last progress), not a whole
    /// backoff after it: the delay before the last try is cut to end at the deadline, never under the floor.
    @Test func backoffEndsAtTheGiveUpDeadline() {
        let policy = ReconnectPolicy(
            initialDelay: .nanoseconds(1000),
            maximumDelay: .nanoseconds(100_000),
            minimumInterval: .nanoseconds(50),
            maximumAttempts: 4,
            giveUpAfter: .nanoseconds(10_000)
        )
        let top = 0.999_999_9
        // Far from the deadline the backoff is as before: 8,000 at the 4th failure.
        #expect(policy.delay(failures: 4, sinceLastConnect: 1_000_000, sinceProgress: 0, random: top) / 10 == 799)
        // 3,000 before it, the backoff of 8,000 is cut to 3,000.
        #expect(policy.delay(failures: 4, sinceLastConnect: 1_000_000, sinceProgress: 7000, random: top) == 3000)
        // At the deadline only the floor is left.
        #expect(policy.delay(failures: 4, sinceLastConnect: 20, sinceProgress: 9990, random: top) == 30)
        // Past it, nothing is cut (the next failure gives up).
        #expect(policy.delay(failures: 4, sinceLastConnect: 1_000_000, sinceProgress: 20_000, random: top) / 10 == 799)
        #expect(policy.givesUp(after: 4, sinceProgress: 10_000) && !policy.givesUp(after: 4, sinceProgress: 9_999))
    }
}
