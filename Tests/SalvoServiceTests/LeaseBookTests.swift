import SalvoTestTraits
import Testing

@testable import SalvoService

/// A worker's leases as a value, with the time given: what its sending job may write after claims, renewals that
/// find rows held or gone, commits, and a stall past the lease.
@Suite(.tags(.pure), .runs(.pure)) struct LeaseBookTests {
    /// A 60-second lease: the margin is 15 s, so a row claimed at 0 is written until 45 s without a renewal.
    static func book() -> LeaseBook { LeaseBook(lease: .seconds(60)) }

    static func lines(_ seqs: [Int]) -> [Int] { seqs.map(ServiceMarks.line) }

    @Test func aClaimedRowIsWrittenWithinItsLeaseAndWithheldNearItsEnd() {
        var book = Self.book()
        #expect(book.margin == 15_000)
        book.claimed([1, 2], at: 0)
        #expect(book.withheld(Self.lines([1, 2]), now: 44_999).isEmpty)
        // Past the margin without a renewal: lapsed, not written (given back as never written).
        #expect(book.withheld(Self.lines([1, 2]), now: 45_000) == Set(Self.lines([1, 2])))
        #expect(book.lapsed == 2)
        // A line the book does not hold (a store without leases) is let through.
        #expect(book.withheld([999], now: 1_000_000).isEmpty)
    }

    /// The connections' question at every flush: nothing more leaves once a row written here, its outcome not on
    /// its way, may be another worker's (its frames may still wait in a connection); rows not yet written, or whose
    /// outcome the writer has, do not count.
    @Test func everyWriteIsForbiddenOnceAWrittenRowMayBeAnotherWorkers() {
        var book = Self.book()
        book.claimed([1, 2], at: 0)
        // Nothing written yet: a lapsed lease of a row still in the feed forbids nothing (it is withheld itself).
        var forbidden = book.mayHaveLostAWrittenRow(now: 50_000)
        #expect(!forbidden)
        #expect(book.withheld(Self.lines([1]), now: 1_000).isEmpty)
        forbidden = book.mayHaveLostAWrittenRow(now: 44_999)
        #expect(!forbidden)
        // Row 1 written, unanswered, its lease within the margin of its end: a worker waking from a stall.
        forbidden = book.mayHaveLostAWrittenRow(now: 45_000)
        #expect(forbidden)
        // A renewal that finds it held clears it, until the new lease nears its end.
        let renewed = book.renewed(book.renewalStarted(), held: [1, 2], until: 40_000 + 60_000)
        #expect(renewed.isEmpty)
        forbidden = book.mayHaveLostAWrittenRow(now: 45_000)
        #expect(!forbidden)
        forbidden = book.mayHaveLostAWrittenRow(now: 85_000)
        #expect(forbidden)
        // Its outcome on its way to the store: no frame of it waits any more.
        book.settling([1])
        forbidden = book.mayHaveLostAWrittenRow(now: 85_000)
        #expect(!forbidden)
        // A written row another worker took over forbids every write until the job gives it back.
        book.claimed([3], at: 90_000)
        #expect(book.withheld(Self.lines([3]), now: 90_001).isEmpty)
        let loss = book.renewed(book.renewalStarted(), held: [2], until: 150_000)
        #expect(loss.written == [3])
        forbidden = book.mayHaveLostAWrittenRow(now: 90_002)
        #expect(forbidden)
        #expect(book.gaveBack(line: ServiceMarks.line(3)) == 3)
        forbidden = book.mayHaveLostAWrittenRow(now: 90_003)
        #expect(!forbidden)
    }

    @Test func aRenewalThatFindsTheRowsExtendsTheirLeases() {
        var book = Self.book()
        book.claimed([1, 2], at: 0)
        let ticket = book.renewalStarted()
        let loss = book.renewed(ticket, held: [1, 2], until: 20_000 + 60_000)
        #expect(loss.isEmpty)
        #expect(book.withheld(Self.lines([1, 2]), now: 64_999).isEmpty)
        #expect(book.withheld(Self.lines([1]), now: 65_000) == Set(Self.lines([1])))
    }

    /// The stalled worker: stopped past its lease, another worker took its rows; when it wakes, the rows it had
    /// written are left to the new holder, the others are never written, and no row it lost is written again (a
    /// resend of a written one included), whatever comes first: the job's next write or the renewal.
    @Test func rowsAnotherWorkerTookAreNeverWrittenAgain() {
        var book = Self.book()
        book.claimed([1, 2, 3], at: 0)
        // Row 1 was written before the stall; 2 and 3 waited in the feed.
        #expect(book.withheld(Self.lines([1]), now: 1_000).isEmpty)
        // It wakes at 100 s: the job comes first, and writes none of them (their lease has lapsed).
        #expect(book.withheld(Self.lines([1, 2, 3]), now: 100_000) == Set(Self.lines([1, 2, 3])))
        // Then the renewal: the other worker holds 1 and 2; 3 is still this worker's (nobody claimed it).
        let ticket = book.renewalStarted()
        let loss = book.renewed(ticket, held: [3], until: 160_000)
        #expect(loss.written == [1])
        #expect(loss.unwritten == [2])
        // A lost row is asked about no more.
        #expect(book.renewalStarted().seqs == [3])
        // Row 1's resend and row 2 are withheld for good; row 3 may be written again.
        #expect(book.withheld(Self.lines([1, 2, 3]), now: 100_001) == Set(Self.lines([1, 2])))
        // The job gives the lost rows back: their outcomes are dropped, and they leave the book.
        #expect(book.gaveBack(line: ServiceMarks.line(1)) == 1)
        #expect(book.gaveBack(line: ServiceMarks.line(2)) == 2)
        #expect(book.gaveBack(line: ServiceMarks.line(3)) == nil)
        #expect(book.count == 1 && book.lostCount == 0)
    }

    /// Found lost by a renewal before the job reached them: the rows still waiting are taken out, though their lease
    /// has not yet run out here (a clock behind the other worker's, a commit fenced).
    @Test func rowsFoundLostBeforeTheirLeaseEndsAreTakenOutOfTheSending() {
        var book = Self.book()
        book.claimed([5, 6], at: 0)
        let ticket = book.renewalStarted()
        let loss = book.renewed(ticket, held: [6], until: 80_000)
        #expect(loss.unwritten == [5] && loss.written.isEmpty)
        #expect(book.withheld(Self.lines([5, 6]), now: 21_000) == Set(Self.lines([5])))
    }

    /// A renewal judges only the rows held when it was asked for: a row claimed meanwhile, a row whose outcome is on
    /// its way, and a row claimed again since are not lost for being missing from its answer.
    @Test func aRenewalJudgesOnlyTheRowsItWasAskedAbout() {
        var book = Self.book()
        book.claimed([1, 2, 3], at: 0)
        book.settling([2])
        let ticket = book.renewalStarted()
        // Renewed: every row held, the one whose outcome is on its way too (it is this worker's until it commits).
        #expect(ticket.seqs == [1, 2, 3])
        // Meanwhile: row 4 claimed, row 3 committed and claimed again, row 2's outcome committed.
        book.claimed([4], at: 10_000)
        book.settled([3])
        book.claimed([3], at: 10_000)
        book.settled([2])
        let loss = book.renewed(ticket, held: [1], until: 70_000)
        #expect(loss.isEmpty)
        #expect(book.withheld(Self.lines([1, 3, 4]), now: 50_000).isEmpty)
        #expect(book.count == 3)
    }

    @Test func aCommittedOrFencedRowLeavesTheBook() {
        var book = Self.book()
        book.claimed([1, 2], at: 0)
        book.settled([1, 2])
        #expect(book.count == 0)
        // A row that left the book is let through (its outcome is the store's to judge), and judged by no renewal.
        let ticket = book.renewalStarted()
        #expect(book.renewed(ticket, held: [], until: 60_000).isEmpty)
    }
}
