import SalvoCampaigns
import SalvoService
import SalvoTestTraits
import Testing

/// The decisions of a campaign run by a fleet, without a socket: the cut, which partition a claim takes and with what
/// fence, the rate a claim carries so that the fleet's claims never pass the campaign's, which rows of a partition
/// taken over are uncertain, when a holder stops for want of a lease, when the campaign is done, and how the
/// campaign's machine follows what another worker recorded. Times are numbers the tests choose.
@Suite(.tags(.pure), .runs(.pure))
struct CampaignPartitionsTests {
    typealias Slot = CampaignPartitions.Slot

    @Test func anAudienceIsCutIntoPartitionsOfTheSameSizeButTheLast() {
        #expect(CampaignPartitions.sizes(rows: 25, rowsPerPartition: 10) == [10, 10, 5])
        #expect(CampaignPartitions.sizes(rows: 20, rowsPerPartition: 10) == [10, 10])
        #expect(CampaignPartitions.sizes(rows: 3, rowsPerPartition: 10) == [3])
        #expect(CampaignPartitions.sizes(rows: 0, rowsPerPartition: 10).isEmpty)
    }

    @Test func aClaimTakesTheFirstPartitionWhoseLeaseRanOutElseTheFirstOpenOne() {
        let slots = [
            Slot(part: 2, state: .open, leaseUntil: nil, fence: 3),
            Slot(part: 3, state: .open, leaseUntil: nil, fence: 0),
            Slot(part: 1, state: .held, leaseUntil: 500, fence: 1),
            Slot(part: 0, state: .held, leaseUntil: 2_000, fence: 1),
        ]
        // A lease that ran out first, even with open partitions before it: a takeover with its fence raised (its
        // holder is fenced off).
        #expect(
            CampaignPartitions.choose(slots, now: 1_000)
                == CampaignPartitions.Choice(part: 1, fence: 2, takeover: true)
        )
        // Every live lease: the first open partition in order, its fence one more.
        #expect(
            CampaignPartitions.choose(slots, now: 500)
                == CampaignPartitions.Choice(part: 2, fence: 4, takeover: false)
        )
        let held = slots.filter { $0.state == .held }
        #expect(
            CampaignPartitions.choose(held, now: 1_000)
                == CampaignPartitions.Choice(part: 1, fence: 2, takeover: true)
        )
        // A lease is the holder's up to its last millisecond.
        #expect(CampaignPartitions.choose(held, now: 500) == nil)
        #expect(CampaignPartitions.nextExpiry(held, now: 400) == 500)
        #expect(CampaignPartitions.choose([], now: 0) == nil)
    }

    @Test func aCampaignIsDoneOnceEveryPartitionIsElseItsWorkersWaitForTheNextLeaseToEnd() {
        let done = [Slot(part: 0, state: .done, leaseUntil: nil, fence: 1)]
        #expect(CampaignPartitions.standing(done, now: 0) == .done)
        #expect(CampaignPartitions.standing([], now: 0) == .done)
        let held =
            done + [
                Slot(part: 1, state: .held, leaseUntil: 900, fence: 1),
                Slot(part: 2, state: .held, leaseUntil: 700, fence: 2),
            ]
        #expect(CampaignPartitions.standing(held, now: 600) == .waiting(until: 700))
    }

    /// The claims in flight never carry more than the campaign's rate together, whatever order the workers claim in;
    /// the rate is shared evenly once every worker has claimed again.
    @Test func theClaimsInFlightNeverCarryMoreThanTheCampaignsRate() {
        #expect(CampaignPartitions.share(rate: nil, held: [], workers: 3) == .unpaced)
        // One worker alone takes the whole rate.
        #expect(CampaignPartitions.share(rate: 1_000, held: [], workers: 1) == .paced(1_000))
        // A second comes while the first holds it all: it waits for the first's partition to end.
        #expect(CampaignPartitions.share(rate: 1_000, held: [1_000], workers: 2) == .wait)
        // The first claims again: half; then the second: the other half.
        #expect(CampaignPartitions.share(rate: 1_000, held: [], workers: 2) == .paced(500))
        #expect(CampaignPartitions.share(rate: 1_000, held: [500], workers: 2) == .paced(500))
        // A third comes: what is left, never more than the even share.
        #expect(CampaignPartitions.share(rate: 1_000, held: [500, 500], workers: 3) == .wait)
        #expect(CampaignPartitions.share(rate: 1_000, held: [500], workers: 3) == .paced(333))
        // Less than half an even share left (a dead worker's claim holds its share until its lease ends): wait,
        // rather than run a partition at 2 a second; half or more: what is left.
        #expect(CampaignPartitions.share(rate: 5_000, held: [1_666, 1_666, 1_666], workers: 3) == .wait)
        #expect(CampaignPartitions.share(rate: 1_000, held: [500, 340], workers: 3) == .wait)
        #expect(CampaignPartitions.share(rate: 1_000, held: [500, 300], workers: 3) == .paced(200))
        // A rate under the workers' number: one a second each, as long as any is left.
        #expect(CampaignPartitions.share(rate: 2, held: [1], workers: 5) == .paced(1))
        #expect(CampaignPartitions.share(rate: 2, held: [1, 1], workers: 5) == .wait)

        // Any sequence of claims and releases by three workers: the live shares never add up past the rate.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let rate = Int.random(in: 1...2_000, using: &generator)
            var held: [Int] = []
            for _ in 0..<50 {
                if !held.isEmpty && Bool.random(using: &generator) {
                    held.remove(at: Int.random(in: 0..<held.count, using: &generator))
                } else if case .paced(let share) = CampaignPartitions.share(rate: rate, held: held, workers: 3) {
                    held.append(share)
                }
                #expect(held.reduce(0, +) <= rate)
            }
        }
    }

    @Test func aHolderWhoseCheckpointsFailStopsWhileItsLeaseStillHasItsMarginLeft() {
        // Renewed at 1,000 for 9,000 ms, a margin of 3,000: it goes on to 6,999 and stops from 7,000.
        #expect(!CampaignPartitions.mustStop(lastRenewed: 1_000, lease: 9_000, margin: 3_000, now: 6_999))
        #expect(CampaignPartitions.mustStop(lastRenewed: 1_000, lease: 9_000, margin: 3_000, now: 7_000))
    }

    /// Line 1 is the header; rows are lines 2...; byte 0 is no line. States: 0 none, 1 written, 2-5 settled.
    @Test func rowsATakerInheritsAreThoseWrittenAndThoseTheHolderMayHaveWrittenSince() {
        // Rows on lines 2-11: 2-4 confirmed, 5 written, 6 rejected, 7 written, 8-11 never handed out.
        let states: [UInt8] = [0, 0, 2, 2, 2, 1, 4, 1, 0, 0, 0, 0]
        // Paced at 1 a second, the checkpoint 2,000 ms before the lease's end, and one more for the pacing's burst:
        // three rows after the furthest handed out (line 7) may have gone.
        let paced = CampaignPartitions.takeover(
            states: states,
            lines: states.count,
            headerLines: 1,
            share: 1,
            checkpointAt: 8_000,
            leaseUntil: 10_000,
            burst: 1
        )
        #expect(paced.writtenAtCheckpoint == 2 && paced.writtenSince == 3 && paced.uncertain == 5)
        #expect(paced.states == [0, 0, 2, 2, 2, 1, 4, 1, 1, 1, 1, 0])
        // Settled rows stay settled, whatever the bound.
        let unpaced = CampaignPartitions.takeover(
            states: states,
            lines: states.count,
            headerLines: 1,
            share: nil,
            checkpointAt: 8_000,
            leaseUntil: 10_000,
            burst: 0
        )
        #expect(unpaced.states == [0, 0, 2, 2, 2, 1, 4, 1, 1, 1, 1, 1] && unpaced.uncertain == 6)
        // A checkpoint that is not of this file's size, or none: every row may have been written.
        let none = CampaignPartitions.takeover(
            states: nil,
            lines: 5,
            headerLines: 1,
            share: 100,
            checkpointAt: nil,
            leaseUntil: 10_000,
            burst: 0
        )
        #expect(none.states == [0, 0, 1, 1, 1] && none.uncertain == 3)
        let wrongSize = CampaignPartitions.takeover(
            states: [0, 0, 2],
            lines: 5,
            headerLines: 1,
            share: nil,
            checkpointAt: 1,
            leaseUntil: 2,
            burst: 0
        )
        #expect(wrongSize.states == [0, 0, 1, 1, 1])
        // A header of two lines (a quoted line end) is never a row.
        let twoLineHeader = CampaignPartitions.takeover(
            states: [0, 0, 0, 2, 0],
            lines: 5,
            headerLines: 2,
            share: nil,
            checkpointAt: 1,
            leaseUntil: 2,
            burst: 0
        )
        #expect(twoLineHeader.states == [0, 0, 0, 2, 1] && twoLineHeader.writtenSince == 1)
        #expect(PartitionSpool.headerLines(Array("\"a\nb\",token\nx,y\n".utf8)) == 2)
        #expect(PartitionSpool.headerLines(Array("token\nx\n".utf8)) == 1)
    }

    @Test func aWorkerFollowsWhatAnotherRecordedAndStopsItsPartWithoutRecordingAgain() {
        var machine = CampaignMachine()
        // A campaign made elsewhere and running there: taken up and started here.
        #expect(machine.follow(id: "c", state: .running, sendAt: 0) == [.start("c")])
        #expect(machine.follow(id: "c", state: .running, sendAt: 0).isEmpty)
        // Paused elsewhere: this worker's job stops; once ended, the campaign is paused here, recorded by no one again.
        #expect(machine.follow(id: "c", state: .paused, sendAt: 0) == [.stop("c", .elsewhere)])
        #expect(machine.follow(id: "c", state: .paused, sendAt: 0).isEmpty)
        #expect(machine.jobEnded(id: "c", .stopped("another worker of the fleet changed the campaign")).isEmpty)
        #expect(machine.campaigns["c"]?.state == .paused && machine.campaigns["c"]?.jobRunning == false)
        // Resumed elsewhere: started here again.
        #expect(machine.follow(id: "c", state: .running, sendAt: 0) == [.start("c")])
        // Finished here while running: recorded, as one worker alone records it.
        #expect(machine.jobEnded(id: "c", .finished) == [.record("c", .finished, message: nil)])
        // A campaign cancelled elsewhere while it waits here: it takes the state, nothing runs.
        #expect(machine.follow(id: "d", state: .scheduled, sendAt: 50).isEmpty)
        #expect(machine.follow(id: "d", state: .cancelled, sendAt: 50).isEmpty)
        #expect(machine.campaigns["d"]?.state == .cancelled)
        // A pause asked here while the part stops for another worker's change is refused.
        _ = machine.follow(id: "e", state: .running, sendAt: 0)
        _ = machine.follow(id: "e", state: .cancelled, sendAt: 0)
        #expect(throws: CampaignMachine.Refusal.self) { try machine.pause(id: "e") }
        // A stopping service starts nothing a follow would.
        _ = machine.shutdown()
        #expect(machine.follow(id: "f", state: .running, sendAt: 0).isEmpty)
    }
}
