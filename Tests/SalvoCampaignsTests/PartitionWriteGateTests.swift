import NIOConcurrencyHelpers
import SalvoRows
import SalvoService
import SalvoTestTraits
import Testing

@testable import SalvoCampaigns

/// The question a fleet partition's job asks before each write, without a socket: its lease runs from the claim and
/// from each committed checkpoint, and the gate closes once less than the margin is left, on the worker's own clock
/// (a worker that wakes from a stall learns so before any checkpoint runs), withholding every row and stopping the
/// job once, with the grace the streams in flight get.
@Suite(.tags(.pure), .runs(.pure))
struct PartitionWriteGateTests {
    @Test func theGateClosesWhenTheLeaseAsLastRenewedHasLessThanItsMarginLeft() {
        var fleet = CampaignFleet()
        fleet.lease = 9_000  // margin 3,000: writes until 6,000 after the last renewal
        let clock = NIOLockedValueBox<Int64>(100_000)
        let stop = JobStop(grace: .seconds(5))
        let requests = NIOLockedValueBox(0)
        stop.install { _ in requests.withLockedValue { $0 += 1 } }
        let gate = PartitionWriteGate(
            claimedAt: 100_000,
            fleet: fleet,
            now: { clock.withLockedValue { $0 } },
            stop: stop
        )
        #expect(gate.withheld([1, 2, 3]).isEmpty)
        clock.withLockedValue { $0 = 105_999 }
        #expect(gate.withheld([4]).isEmpty)
        // A checkpoint committed at 105,000 renews it: open until 111,000.
        gate.renewed(at: 105_000)
        clock.withLockedValue { $0 = 110_999 }
        #expect(gate.withheld([5]).isEmpty)
        // An older renewal arriving late moves nothing back.
        gate.renewed(at: 101_000)
        #expect(!gate.isClosed(at: 110_999))
        #expect(requests.withLockedValue { $0 } == 0 && stop.reason == nil)

        // The worker wakes from a stall: its clock past the margin, every row withheld, the job stopped once.
        clock.withLockedValue { $0 = 125_000 }
        #expect(gate.withheld([6, 7, 8]) == [6, 7, 8])
        #expect(gate.withheld([9]) == [9])
        #expect(requests.withLockedValue { $0 } == 1, "asked once: a second request would cut the grace")
        #expect(stop.reason == "the partition's lease may have run out")
        #expect(gate.isClosed(at: 125_000))
    }
}
