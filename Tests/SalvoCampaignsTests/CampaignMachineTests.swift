import SalvoCampaigns
import SalvoTestTraits
import Testing

/// Every scheduling and lifecycle decision of the campaigns, without a socket or a file: which campaign starts when,
/// what pause, resume and cancel do in each state and which are refused, what a job's end makes of its campaign, and
/// what a restart resumes. Time is a number the tests choose.
@Suite(.tags(.pure), .runs(.pure))
struct CampaignMachineTests {
    typealias Action = CampaignMachine.Action

    @Test func aCampaignWhoseTimeHasComeStartsAtOnceAndTheOthersWaitForIt() {
        var machine = CampaignMachine()
        let now = Self.minute(10)
        let past = machine.create(id: "past", sendAt: now - 1, now: now)
        #expect(past.state == .running && past.startedNow && past.actions == [.start("past")])
        let exactly = machine.create(id: "exactly", sendAt: now, now: now)
        #expect(exactly.startedNow && exactly.actions == [.start("exactly")])
        let later = machine.create(id: "later", sendAt: Self.minute(12), now: now)
        #expect(later.state == .scheduled && !later.startedNow && later.actions.isEmpty)
        let sooner = machine.create(id: "sooner", sendAt: Self.minute(11), now: now)
        #expect(machine.nextDue == Self.minute(11) && sooner.state == .scheduled)

        #expect(machine.tick(now: Self.minute(11) - 1).isEmpty)
        #expect(machine.tick(now: Self.minute(11)) == [.record("sooner", .running, message: nil), .start("sooner")])
        #expect(machine.nextDue == Self.minute(12))
        // Both due by now: the one due first starts first; a tick again starts nothing twice.
        var other = machine
        _ = other.create(id: "early", sendAt: Self.minute(11) + 5, now: now)
        #expect(
            other.tick(now: Self.minute(13)) == [
                .record("early", .running, message: nil), .start("early"), .record("later", .running, message: nil),
                .start("later"),
            ]
        )
        #expect(other.tick(now: Self.minute(14)).isEmpty)
        #expect(other.nextDue == nil)
    }

    @Test func aPauseStopsTheJobAndTheCampaignIsPausedOnceItHasStopped() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "c", sendAt: 0, now: 1)
        #expect(try machine.pause(id: "c") == [.stop("c", .pause)])
        // A second pause while the job stops asks nothing more.
        #expect(try machine.pause(id: "c").isEmpty)
        #expect(machine.campaigns["c"]?.state == .running)
        // A resume before the job has stopped is refused: it would run two jobs on one journal.
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.resume(id: "c", now: 2) }
        #expect(machine.jobEnded(id: "c", .stopped("paused through the API")) == [.record("c", .paused, message: nil)])
        #expect(machine.campaigns["c"] == CampaignMachine.Campaign(state: .paused, sendAt: 0))
        #expect(try machine.pause(id: "c").isEmpty)
        #expect(try machine.resume(id: "c", now: 3) == [.record("c", .running, message: nil), .start("c")])
        #expect(machine.campaigns["c"]?.jobRunning == true)
        #expect(try machine.resume(id: "c", now: 3).isEmpty)
        #expect(machine.jobEnded(id: "c", .finished) == [.record("c", .finished, message: nil)])
    }

    @Test func aJobThatFinishesWhileItIsBeingPausedLeavesTheCampaignFinished() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "c", sendAt: 0, now: 0)
        _ = try machine.pause(id: "c")
        #expect(machine.jobEnded(id: "c", .finished) == [.record("c", .finished, message: nil)])
    }

    @Test func aScheduledCampaignPausedAndResumedWaitsForItsTimeOrStartsWhenItHasCome() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "c", sendAt: 100, now: 0)
        #expect(try machine.pause(id: "c") == [.record("c", .paused, message: nil)])
        // Paused, its time passing starts nothing.
        #expect(machine.tick(now: 200).isEmpty)
        var early = machine
        #expect(try early.resume(id: "c", now: 50) == [.record("c", .scheduled, message: nil)])
        #expect(early.tick(now: 100) == [.record("c", .running, message: nil), .start("c")])
        #expect(try machine.resume(id: "c", now: 200) == [.record("c", .running, message: nil), .start("c")])
    }

    @Test func aCancelStopsARunningJobOrClosesOutACampaignWithout() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "running", sendAt: 0, now: 0)
        #expect(try machine.cancel(id: "running") == [.stop("running", .cancel)])
        #expect(try machine.cancel(id: "running").isEmpty)
        // However the job ends once cancelled, the campaign is cancelled.
        #expect(
            machine.jobEnded(id: "running", .failed("the gateway was given up on")) == [
                .record("running", .cancelled, message: nil)
            ]
        )

        _ = machine.create(id: "scheduled", sendAt: 100, now: 0)
        #expect(
            try machine.cancel(id: "scheduled") == [
                .record("scheduled", .cancelled, message: nil), .closeOut("scheduled"),
            ]
        )
        // The closing run's end changes nothing, and it never starts.
        #expect(machine.jobEnded(id: "scheduled", .stopped("cancelled through the API")).isEmpty)
        #expect(machine.tick(now: 200).isEmpty)
        #expect(machine.campaigns["scheduled"]?.state == .cancelled)

        // A pause turned into a cancel: the job is asked again (at once) and the campaign ends cancelled.
        _ = machine.create(id: "pausing", sendAt: 0, now: 0)
        _ = try machine.pause(id: "pausing")
        #expect(try machine.cancel(id: "pausing") == [.stop("pausing", .cancel)])
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.pause(id: "pausing") }
        #expect(
            machine.jobEnded(id: "pausing", .stopped("cancelled")) == [.record("pausing", .cancelled, message: nil)]
        )
    }

    @Test func operationsTheStateDoesNotAllowAreRefusedAndChangeNothing() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "done", sendAt: 0, now: 0)
        _ = machine.jobEnded(id: "done", .finished)
        let finished = machine.campaigns["done"]
        for operation in [CampaignMachine.Operation.pause, .resume, .cancel] {
            let error = #expect(throws: CampaignMachine.Refusal.self) {
                switch operation {
                case .pause: _ = try machine.pause(id: "done")
                case .resume: _ = try machine.resume(id: "done", now: 1)
                case .cancel: _ = try machine.cancel(id: "done")
                }
            }
            #expect(error?.state == .finished)
            #expect(error?.reason.contains("finished campaign cannot") == true, "\(String(describing: error))")
        }
        #expect(machine.campaigns["done"] == finished)

        _ = machine.create(id: "gone", sendAt: 0, now: 0)
        _ = try machine.cancel(id: "gone")
        _ = machine.jobEnded(id: "gone", .stopped("cancelled"))
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.resume(id: "gone", now: 1) }
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.pause(id: "gone") }
        #expect(try machine.cancel(id: "gone").isEmpty)
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.pause(id: "nobody") }
    }

    @Test func aJobThatStopsOnItsOwnFailsItsCampaignWhichCanBeResumedOrCancelled() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "c", sendAt: 0, now: 0)
        #expect(
            machine.jobEnded(id: "c", .stopped("the credentials were refused")) == [
                .record("c", .failed, message: "the credentials were refused")
            ]
        )
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.pause(id: "c") }
        var cancelled = machine
        #expect(try cancelled.cancel(id: "c") == [.record("c", .cancelled, message: nil), .closeOut("c")])
        #expect(try machine.resume(id: "c", now: 1) == [.record("c", .running, message: nil), .start("c")])
        #expect(
            machine.jobEnded(id: "c", .failed("input changed")) == [.record("c", .failed, message: "input changed")]
        )
    }

    @Test func aShutdownStopsTheJobsAndLeavesTheirCampaignsRunningForTheNextStart() throws {
        var machine = CampaignMachine()
        _ = machine.create(id: "a", sendAt: 0, now: 0)
        _ = machine.create(id: "b", sendAt: 0, now: 0)
        _ = machine.create(id: "later", sendAt: 100, now: 0)
        _ = machine.create(id: "paused", sendAt: 0, now: 0)
        _ = try machine.pause(id: "paused")
        _ = machine.jobEnded(id: "paused", .stopped("paused"))
        #expect(machine.shutdown() == [.stop("a", .shutdown), .stop("b", .shutdown)])
        #expect(machine.jobEnded(id: "a", .stopped("the service is shutting down")).isEmpty)
        #expect(machine.campaigns["a"]?.state == .running)
        // Nothing starts once the service stops, whatever its time.
        #expect(machine.tick(now: 200).isEmpty)
        #expect(throws: CampaignMachine.Refusal.self) { _ = try machine.resume(id: "paused", now: 200) }
        #expect(machine.create(id: "new", sendAt: 0, now: 10).actions.isEmpty)

        // The next start: what was running runs again, the rest stays as it was.
        var next = CampaignMachine()
        #expect(next.restore(id: "a", state: .running, sendAt: 0) == [.start("a")])
        #expect(next.restore(id: "paused", state: .paused, sendAt: 0).isEmpty)
        #expect(next.restore(id: "later", state: .scheduled, sendAt: 100).isEmpty)
        #expect(next.restore(id: "done", state: .finished, sendAt: 0).isEmpty)
        #expect(next.tick(now: 99).isEmpty)
        #expect(next.tick(now: 100) == [.record("later", .running, message: nil), .start("later")])
        #expect(next.campaigns["paused"]?.state == .paused)
    }

    static func minute(_ minute: Int64) -> Int64 { 1_796_000_000_000 + minute * 60_000 }
}
