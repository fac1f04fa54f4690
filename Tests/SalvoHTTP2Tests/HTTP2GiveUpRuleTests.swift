import APNSWire
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// The one give-up rule of an HTTP/2 job, with a fake clock: a wait for the job's own input (nothing to send,
/// nothing in flight, the source not read to its end) is not the server's stall; and the job's reconnect spacing
/// after connections that were answered.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2GiveUpRuleTests {
    static let start = NIODeadline.uptimeNanoseconds(5_000_000_000)

    @Test func onlyAJobWithNothingToSendNothingInFlightAndInputToComeWaitsForItsInput() {
        #expect(HTTP2ProgressWatch.waitsForInput(ready: 0, delayed: 0, outstanding: 0, sourceExhausted: false))
        #expect(!HTTP2ProgressWatch.waitsForInput(ready: 1, delayed: 0, outstanding: 0, sourceExhausted: false))
        #expect(!HTTP2ProgressWatch.waitsForInput(ready: 0, delayed: 1, outstanding: 0, sourceExhausted: false))
        #expect(!HTTP2ProgressWatch.waitsForInput(ready: 0, delayed: 0, outstanding: 1, sourceExhausted: false))
        #expect(!HTTP2ProgressWatch.waitsForInput(ready: 0, delayed: 0, outstanding: 0, sourceExhausted: true))
    }

    @Test func aWaitForInputIsProgressAndAWaitForTheServerIsNot() {
        var watch = HTTP2ProgressWatch(giveUpAfter: .seconds(1), now: Self.start)
        // A look for rows at 0.9 s that found none while the input was still being read.
        watch.foundNoRows(waitingForInput: true, now: Self.start + .milliseconds(900))
        #expect(!watch.isStalled(now: Self.start + .milliseconds(1899)))
        #expect(watch.isStalled(now: Self.start + .milliseconds(1900)))
        // Found none while rows were in flight or waiting for a retry: the server's time, no progress.
        watch.foundNoRows(waitingForInput: false, now: Self.start + .milliseconds(1800))
        #expect(watch.progressUntil == Self.start + .milliseconds(900))
    }

    @Test func aJobWhoseFirstChunkIsSlowIsNotGivenUpOnButOneWithRowsInFlightIs() throws {
        let gate = DispatchSemaphore(value: 0)
        let source = GatedRowSource(rows: 3, gate: gate)
        let finished = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        var reconnect = ReconnectPolicy.default
        reconnect.giveUpAfter = .seconds(1)
        let job = HTTP2JobContext(
            work: HTTP2WorkQueue(source: source, chunkRows: 4, finished: finished),
            template: HTTP2RequestTemplate(
                authority: "localhost",
                headers: try APNSRequestHeaders(pushType: .alert, priority: .immediate, topic: testTopic),
                payload: testPayload
            ),
            token: nil,
            connectionConfiguration: HTTP2ConnectionMachine.Configuration(
                maximumStreams: 100,
                requestTimeout: .seconds(60),
                pingInterval: .seconds(600),
                pingTimeout: .seconds(60),
                retry: .default,
                recordDeliveries: false
            ),
            outcomes: RowOutcomes(files: ["tokens.csv"]),
            reconnect: reconnect,
            now: Self.start
        )
        defer {
            job.work.stop(HTTP2JobStop(reason: nil, message: "the test is over"))
            gate.signal()
            job.work.waitForReadAhead()
            finished.succeed()
        }
        // Without a look for rows, the clock runs as before.
        #expect(job.stall(now: Self.start + .milliseconds(1500), host: "h", port: 1) != nil)
        // The first chunk is still being read: connections look every so often and find nothing to send.
        for tenths in 1...14 {
            #expect(job.take(room: 10, now: Self.start + .milliseconds(100 * Int64(tenths))).items.isEmpty)
        }
        #expect(job.stall(now: Self.start + .milliseconds(2399), host: "h", port: 1) == nil)
        // The rows come and go out; with them in flight and no answer, the job stalls a second later.
        gate.signal()
        job.work.waitForReadAhead()
        let sent = job.take(room: 10, now: Self.start + .milliseconds(1500))
        #expect(sent.items.count == 3)
        #expect(job.take(room: 10, now: Self.start + .milliseconds(1600)).items.isEmpty)
        #expect(job.stall(now: Self.start + .milliseconds(2399), host: "h", port: 1) == nil)
        let stall = job.stall(now: Self.start + .milliseconds(2400), host: "h", port: 1)
        #expect(stall?.message.contains("no request was answered by h:1 for 1 s") == true)
    }

    // MARK: Reconnect spacing

    static let policy = ReconnectPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(2),
        minimumInterval: .milliseconds(50),
        maximumAttempts: 4,
        giveUpAfter: .seconds(3)
    )

    @Test func answeredReconnectsAreNotSpacedJobWide() {
        var pacer = HTTP2ReconnectPacer(policy: Self.policy, now: Self.start)
        // A GOAWAY to eight answered connections: every replacement may connect now.
        for _ in 0..<8 {
            pacer.connectionEnded(answered: true)
            #expect(pacer.nextConnect(now: Self.start, random: 0.5) == Self.start)
        }
        // A fruitless one after them keeps the job-wide floor behind the last connect.
        pacer.connectionEnded(answered: false)
        let fruitless = pacer.nextConnect(now: Self.start, random: 0)
        #expect(fruitless == Self.start + .milliseconds(50))
        #expect(pacer.nextConnect(now: Self.start, random: 0) == Self.start + .milliseconds(100))
        // An answered one later never moves the floor back.
        pacer.connectionEnded(answered: true)
        #expect(pacer.nextConnect(now: Self.start + .milliseconds(10), random: 0) == Self.start + .milliseconds(10))
        pacer.connectionEnded(answered: false)
        #expect(pacer.nextConnect(now: Self.start + .milliseconds(20), random: 0) == Self.start + .milliseconds(150))
    }
}

/// A source of `rows` made-up rows whose first chunk waits for `gate`, as a resume reading past many settled rows
/// would.
private final class GatedRowSource: HTTP2RowSource {
    private let rows: Int
    private let gate: DispatchSemaphore
    private let handedOut = NIOLockedValueBox(false)

    init(rows: Int, gate: DispatchSemaphore) {
        self.rows = rows
        self.gate = gate
    }

    func nextChunk(maximumRows: Int) throws -> [TokenRow]? {
        guard !self.handedOut.withLockedValue({ $0 }) else { return nil }
        // Bounded: the test opens the gate, and its end opens it in any case.
        _ = self.gate.wait(timeout: .now() + .seconds(10))
        self.handedOut.withLockedValue { $0 = true }
        return try (1...min(self.rows, maximumRows)).map { line in
            TokenRow(token: try DeviceToken(bytes: [UInt8](repeating: UInt8(line), count: 32)), line: line)
        }
    }
}
