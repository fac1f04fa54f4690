import APNSWire
import NIOCore
import NIOHTTP2
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// The decisions that end a job whose server lets nothing through, with a fake clock: the give-up after the last
/// answer (`HTTP2ProgressWatch`), the job's reconnect backoff after fruitless connections (`HTTP2ReconnectPacer`),
/// and what a connection's machine reports of a stall (SETTINGS that never come, a window too small for a request,
/// no streams allowed, GOAWAY or refusals before any answer).
@Suite(.tags(.network), .runs(.network)) struct StalledJobDecisionTests {
    typealias Machine = HTTP2ConnectionMachine
    static let start = NIODeadline.uptimeNanoseconds(5_000_000_000)

    // MARK: Give-up

    @Test func theWatchGivesUpAfterItsTimeWithoutAnAnswer() {
        var watch = HTTP2ProgressWatch(giveUpAfter: .seconds(3), now: Self.start)
        #expect(!watch.isStalled(now: Self.start + .milliseconds(2999)))
        #expect(watch.isStalled(now: Self.start + .seconds(3)))
        // An answer at 2 s moves the deadline to 5 s.
        watch.progressed(until: Self.start + .seconds(2))
        #expect(!watch.isStalled(now: Self.start + .milliseconds(4999)))
        #expect(watch.isStalled(now: Self.start + .seconds(5)))
        // An older mark never moves it back.
        watch.progressed(until: Self.start + .seconds(1))
        #expect(watch.progressUntil == Self.start + .seconds(2))
        let stop = watch.stop(connectionErrors: ["a", "b", "c", "d"], host: "h", port: 1)
        #expect(stop.message.contains("for 3 s (--give-up-seconds): b; c; d"), "\(stop.message)")
    }

    @Test func aWatchWithoutAGiveUpNeverStalls() {
        let watch = HTTP2ProgressWatch(giveUpAfter: .zero, now: Self.start)
        #expect(!watch.isStalled(now: Self.start + .hours(100)))
    }

    // MARK: Reconnect backoff

    static let policy = ReconnectPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(2),
        minimumInterval: .milliseconds(50),
        maximumAttempts: 4,
        giveUpAfter: .seconds(3)
    )

    @Test func fruitlessConnectionsDoubleTheJobsBackoffWithJitterUpToTheMaximum() {
        var pacer = HTTP2ReconnectPacer(policy: Self.policy, now: Self.start)
        #expect(pacer.backoff(random: 0.5) == .zero, "no backoff before a fruitless connection")
        var ceilings: [Int64] = []
        for _ in 1...7 {
            pacer.connectionEnded(answered: false)
            let low = pacer.backoff(random: 0)
            let high = pacer.backoff(random: 0.999_999)
            // Drawn from the upper half of the ceiling: it grows whatever the draw.
            #expect(high.nanoseconds >= low.nanoseconds && high.nanoseconds < 2 * low.nanoseconds)
            ceilings.append(low.nanoseconds * 2 / 1_000_000)
        }
        #expect(ceilings == [100, 200, 400, 800, 1600, 2000, 2000])
        // An answer on any connection starts again.
        pacer.answered()
        #expect(pacer.backoff(random: 0.5) == .zero)
        pacer.connectionEnded(answered: false)
        pacer.connectionEnded(answered: true)
        #expect(pacer.fruitless == 0)
    }

    @Test func slotsShareTheBackoffAndAreSpacedByTheFloor() {
        var pacer = HTTP2ReconnectPacer(policy: Self.policy, now: Self.start)
        pacer.connectionEnded(answered: false)
        let first = pacer.nextConnect(now: Self.start, random: 0)
        #expect(first == Self.start + .milliseconds(50))
        // A second slot asking at the same time comes after the first, never with it.
        let second = pacer.nextConnect(now: Self.start, random: 0)
        #expect(second == Self.start + .milliseconds(100))
        // Over a 6 s stall, fruitless connects are a handful, not dozens a second.
        var now = Self.start
        var connects = 0
        while now < Self.start + .seconds(6) {
            pacer.connectionEnded(answered: false)
            now = max(now, pacer.nextConnect(now: now, random: 0.5))
            connects += 1
        }
        #expect(connects <= 10, "\(connects) connects")
    }

    // MARK: The connection's machine

    static func machine(largestBody: Int = 0) -> Machine {
        // The connection machine's tests' settings, with a SETTINGS deadline and the job's largest body.
        var configuration = HTTP2ConnectionMachineTests.machine().configuration
        configuration.settingsTimeout = .seconds(2)
        configuration.largestBody = largestBody
        return Machine(
            configuration: configuration,
            outcomes: RowOutcomes(files: ["tokens.csv"]),
            random: SplitMix64(seed: 9),
            now: Self.start
        )
    }

    static func items(_ count: Int) -> [HTTP2WorkItem] {
        (1...count).map { line in
            HTTP2WorkItem(row: TokenRow(token: try! DeviceToken(bytes: [UInt8](repeating: 7, count: 32)), line: line))
        }
    }

    @Test func settingsThatNeverComeCloseTheConnection() {
        var machine = Self.machine()
        machine.opened(now: Self.start)
        #expect(!machine.tick(now: Self.start + .milliseconds(1999)).close)
        let actions = machine.tick(now: Self.start + .seconds(2))
        #expect(actions.close)
        #expect(actions.note?.contains("no SETTINGS") == true)
        #expect(machine.state == .closed)
        #expect(machine.answers == 0)
    }

    @Test func aStreamWindowSmallerThanOneBodyStopsTheJob() {
        var machine = Self.machine(largestBody: 200)
        let actions = machine.settingsReceived(maximumConcurrentStreams: 100, initialWindowSize: 64, now: Self.start)
        #expect(actions.stopJob?.message.contains("SETTINGS_INITIAL_WINDOW_SIZE 64") == true)
        var fits = Self.machine(largestBody: 200)
        #expect(
            fits.settingsReceived(maximumConcurrentStreams: 100, initialWindowSize: 200, now: Self.start).stopJob == nil
        )
    }

    @Test func noStreamsAllowedIsNotedAndTakesNoRow() {
        var machine = Self.machine()
        let actions = machine.settingsReceived(maximumConcurrentStreams: 0, now: Self.start)
        #expect(actions.note?.contains("SETTINGS_MAX_CONCURRENT_STREAMS 0") == true)
        #expect(machine.roomToWrite(isWritable: true) == 0)
    }

    @Test func goAwayBeforeAnyAnswerIsNotedAndTheConnectionWasOfNoUse() {
        var machine = Self.machine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: Self.start)
        let actions = machine.goAwayReceived(lastStreamID: 0, reason: nil, now: Self.start)
        #expect(actions.retire && actions.close)
        #expect(actions.note?.contains("GOAWAY (last stream 0) before any answer") == true)
        #expect(machine.answers == 0)
    }

    @Test func refusalsAreNotedOnceAndAreNoProgress() {
        var machine = Self.machine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: Self.start)
        let (first, _) = machine.writing(Self.items(1), bearer: nil, now: Self.start)
        let refused = machine.streamClosed(streamID: first, code: .refusedStream, now: Self.start)
        #expect(refused.note?.contains("REFUSED_STREAM") == true)
        #expect(machine.takeResults()?.progressUntil == nil, "a refusal is no answer")
        let retry = machine.takeResults()
        #expect(retry == nil)
        let (second, _) = machine.writing(Self.items(1), bearer: nil, now: Self.start)
        #expect(machine.streamClosed(streamID: second, code: .refusedStream, now: Self.start).note == nil)
        #expect(machine.answers == 0)
    }

    @Test func answersAreProgressAndARetryAfterExtendsIt() {
        var machine = Self.machine()
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: Self.start)
        let (first, _) = machine.writing(Self.items(1), bearer: nil, now: Self.start)
        let answeredAt = Self.start + .milliseconds(30)
        _ = machine.headersReceived(
            streamID: first,
            status: 200,
            apnsID: nil,
            retryAfter: nil,
            endStream: true,
            now: answeredAt
        )
        #expect(machine.takeResults()?.progressUntil == answeredAt)
        #expect(machine.answers == 1)
        // A 429 asking for 20 s: the job is not stalled while the row waits for it.
        let (second, _) = machine.writing(Self.items(1), bearer: nil, now: answeredAt)
        _ = machine.headersReceived(
            streamID: second,
            status: 429,
            apnsID: nil,
            retryAfter: 20,
            endStream: false,
            now: answeredAt
        )
        _ = machine.dataReceived(
            streamID: second,
            bytes: ByteBuffer(bytes: errorBody(.tooManyRequests)),
            endStream: true,
            now: answeredAt
        )
        let results = machine.takeResults()!
        #expect(results.retries.count == 1)
        #expect(results.progressUntil == results.retries[0].notBefore)
        #expect(results.retries[0].notBefore >= answeredAt + .seconds(20))
    }
}
