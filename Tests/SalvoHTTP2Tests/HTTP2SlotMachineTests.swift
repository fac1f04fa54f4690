import NIOCore
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// A connection slot's decisions (`HTTP2SlotMachine`) without a socket or a clock: when it connects, replaces a
/// connection and after how long, which address it tries, and that a stopped slot does nothing.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2SlotMachineTests {
    /// Stands for a channel: only its identity matters.
    final class Connection {}

    static let policy = ReconnectPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(2),
        minimumInterval: .milliseconds(50),
        maximumAttempts: 5,
        giveUpAfter: .seconds(10)
    )
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let working = HTTP2SlotMachine.Job(settled: 0, isDone: false)

    static func machine(index: Int = 3, seed: UInt64 = 7) -> HTTP2SlotMachine {
        HTTP2SlotMachine(index: index, policy: Self.policy, random: SplitMix64(seed: seed), now: Self.start)
    }

    /// A machine whose connection is open, connected at `start`.
    static func open(_ connection: Connection) -> HTTP2SlotMachine {
        var machine = Self.machine()
        _ = machine.connectNow(now: Self.start, jobIsDone: false)
        #expect(machine.connected(ObjectIdentifier(connection)) == .none)
        return machine
    }

    /// The delay `action` schedules, failing the test when it schedules none.
    static func delay(_ action: HTTP2SlotMachine.Action) -> TimeAmount? {
        guard case .scheduleConnect(let delay) = action else {
            Issue.record("a connect is scheduled, not \(action)")
            return nil
        }
        return delay
    }

    @Test func theFirstConnectTriesTheSlotsOwnAddressAndReplacesNothing() {
        var machine = Self.machine(index: 3, seed: 7)
        var seeds = SplitMix64(seed: 7)
        #expect(
            machine.connectNow(now: Self.start, jobIsDone: false)
                == .connect(seed: seeds.next(), addressTurn: 3, replacing: false)
        )
        #expect(machine.state == .connecting)
        #expect(machine.connectNow(now: Self.start, jobIsDone: false) == .none, "one connect at a time")
    }

    @Test func aJobThatIsDoneIsNotConnectedFor() {
        var machine = Self.machine()
        #expect(machine.connectNow(now: Self.start, jobIsDone: true) == .none)
        #expect(machine.state == .resting)
    }

    @Test func aFailedConnectBacksOffAtLeastTheFloorAndTriesTheNextAddress() throws {
        var machine = Self.machine(index: 3)
        _ = machine.connectNow(now: Self.start, jobIsDone: false)
        let action = machine.connectFailed(now: Self.start, job: Self.working)
        guard case .reconnectUnlessStalled(let answered, let jitter) = action else {
            Issue.record("a reconnect is due: \(action)")
            return
        }
        #expect(!answered && (0..<1).contains(jitter))
        #expect(machine.failures == 1 && machine.addressTurn == 4)
        let delay = try #require(Self.delay(machine.reconnect(now: Self.start, pacedUntil: Self.start)))
        // Connected just now: the floor (50 ms) at least; one failure: a backoff below 100 ms.
        #expect(delay >= .milliseconds(50) && delay <= .milliseconds(100), "\(delay)")
        #expect(machine.state == .waiting)
        #expect(machine.connectFailed(now: Self.start, job: Self.working) == .none, "a connect is scheduled already")
        guard case .connect(_, 5, true) = machine.connectNow(now: Self.start + delay, jobIsDone: false) else {
            Issue.record("the scheduled connect replaces the slot's connection, on the next address")
            return
        }
    }

    @Test func theBackoffGrowsWithFailuresInARowUpToItsMaximumAndReadyEndsThem() throws {
        var machine = Self.machine()
        var now = Self.start
        var delays: [TimeAmount] = []
        // The job settles rows between failures: progress, so the give-up deadline cuts no backoff.
        for failure in 1...8 {
            _ = machine.connectNow(now: now, jobIsDone: false)
            now = now + .seconds(1)
            _ = machine.connectFailed(now: now, job: HTTP2SlotMachine.Job(settled: failure, isDone: false))
            let delay = try #require(Self.delay(machine.reconnect(now: now, pacedUntil: now)))
            let ceiling = min(100 << (failure - 1), 2000)
            #expect(delay <= .milliseconds(Int64(ceiling)), "failure \(failure): \(delay)")
            delays.append(delay)
            now = now + delay
        }
        #expect(delays.suffix(4).contains { $0 > .milliseconds(200) }, "it grew: \(delays)")
        _ = machine.connectNow(now: now, jobIsDone: false)
        let connection = Connection()
        _ = machine.connected(ObjectIdentifier(connection))
        machine.ready()
        #expect(machine.failures == 0)
        // A ready connection that closed a second later: only the floor, which has passed.
        now = now + .seconds(1)
        _ = machine.closed(
            ObjectIdentifier(connection),
            wasReady: true,
            answered: true,
            finished: false,
            now: now,
            job: Self.working
        )
        #expect(Self.delay(machine.reconnect(now: now, pacedUntil: now)) == .zero)
    }

    @Test func theJobsPacingWinsWhenItIsLater() {
        let connection = Connection()
        var machine = Self.open(connection)
        let now = Self.start + .seconds(1)
        guard case .reconnectUnlessStalled(true, _) = machine.goAway(answered: true, now: now, job: Self.working) else {
            Issue.record("a connection of use is replaced")
            return
        }
        #expect(Self.delay(machine.reconnect(now: now, pacedUntil: now + .seconds(3))) == .seconds(3))
    }

    /// Five failures in a row and 9.9 s without progress: the next try comes by the give-up deadline (10 s), not a
    /// whole backoff after it; progress moves the deadline.
    @Test func theBackoffEndsByTheGiveUpDeadlineAfterTheLastProgress() throws {
        for settledMeanwhile in [false, true] {
            var machine = Self.machine(seed: 11)
            var now = Self.start
            for _ in 1...5 {
                _ = machine.connectNow(now: now, jobIsDone: false)
                _ = machine.connectFailed(now: now, job: Self.working)
                _ = machine.reconnect(now: now, pacedUntil: now)
            }
            _ = machine.connectNow(now: now, jobIsDone: false)
            now = Self.start + .milliseconds(9_900)
            let job = HTTP2SlotMachine.Job(settled: settledMeanwhile ? 1 : 0, isDone: false)
            _ = machine.connectFailed(now: now, job: job)
            let delay = try #require(Self.delay(machine.reconnect(now: now, pacedUntil: now)))
            if settledMeanwhile {
                #expect(delay <= .seconds(2), "a whole backoff from the new mark: \(delay)")
            } else {
                #expect(delay <= .milliseconds(100), "cut to the deadline: \(delay)")
            }
        }
    }

    @Test func aConnectionClosedForWantOfRowsIsNotReplaced() {
        let connection = Connection()
        var machine = Self.open(connection)
        let action = machine.closed(
            ObjectIdentifier(connection),
            wasReady: true,
            answered: true,
            finished: true,
            now: Self.start,
            job: Self.working
        )
        #expect(action == .none && machine.state == .resting)
    }

    @Test func aConnectionClosedBeforeItWasReadyCountsAsAFailure() {
        let connection = Connection()
        var machine = Self.open(connection)
        guard
            case .reconnectUnlessStalled(false, _) = machine.closed(
                ObjectIdentifier(connection),
                wasReady: false,
                answered: false,
                finished: false,
                now: Self.start,
                job: Self.working
            )
        else {
            Issue.record("replaced")
            return
        }
        #expect(machine.failures == 1)
    }

    @Test func theCloseOfAConnectionAlreadyReplacedChangesNothing() {
        let old = Connection()
        let new = Connection()
        var machine = Self.open(old)
        _ = machine.goAway(answered: true, now: Self.start, job: Self.working)
        _ = machine.reconnect(now: Self.start, pacedUntil: Self.start)
        _ = machine.connectNow(now: Self.start + .seconds(1), jobIsDone: false)
        _ = machine.connected(ObjectIdentifier(new))
        let action = machine.closed(
            ObjectIdentifier(old),
            wasReady: true,
            answered: true,
            finished: false,
            now: Self.start + .seconds(2),
            job: Self.working
        )
        #expect(action == .none)
        #expect(machine.state == .open(ObjectIdentifier(new)))
    }

    @Test func aJobThatIsDoneIsNotReconnectedFor() {
        let connection = Connection()
        var machine = Self.open(connection)
        let done = HTTP2SlotMachine.Job(settled: 5, isDone: true)
        #expect(machine.goAway(answered: true, now: Self.start, job: done) == .none)
        #expect(machine.state == .resting)
    }

    @Test func aStoppedSlotConnectsNoMoreAndClosesAConnectionThatOpensLate() {
        var machine = Self.machine()
        _ = machine.connectNow(now: Self.start, jobIsDone: false)
        machine.stop()
        let late = Connection()
        #expect(machine.connected(ObjectIdentifier(late)) == .close)
        #expect(machine.connectFailed(now: Self.start, job: Self.working) == .none)
        #expect(machine.connectNow(now: Self.start, jobIsDone: false) == .none)
        #expect(machine.reconnect(now: Self.start, pacedUntil: Self.start) == .none)
        #expect(machine.state == .stopped)
    }
}
