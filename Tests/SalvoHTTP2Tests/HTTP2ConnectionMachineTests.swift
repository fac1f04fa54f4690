import APNSWire
import NIOCore
import NIOHTTP2
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// The connection's protocol decisions, driven with a fake clock and a fixed seed: no sockets, no sleeping.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2ConnectionMachineTests {
    typealias Machine = HTTP2ConnectionMachine

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let seed: UInt64 = 42
    static let retry = HTTP2RetryPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(5),
        maximumAttempts: 3,
        maximumRetryAfter: .seconds(60)
    )

    static func machine(
        maximumStreams: Int = 100,
        onUncertain: OnUncertain = .resend,
        firstStreamID: Int32 = 1,
        recordDeliveries: Bool = false
    ) -> Machine {
        Machine(
            configuration: Machine.Configuration(
                maximumStreams: maximumStreams,
                requestTimeout: .seconds(10),
                pingInterval: .seconds(60),
                pingTimeout: .seconds(5),
                retry: Self.retry,
                recordDeliveries: recordDeliveries
            ),
            outcomes: RowOutcomes(onUncertain: onUncertain, files: ["tokens.csv"]),
            firstStreamID: firstStreamID,
            random: SplitMix64(seed: Self.seed),
            now: Self.start
        )
    }

    static func items(_ lines: ClosedRange<Int>) -> [HTTP2WorkItem] {
        lines.map { line in
            let token = try! DeviceToken(bytes: [UInt8](repeating: UInt8(line), count: 32))
            return HTTP2WorkItem(row: TokenRow(token: token, line: line))
        }
    }

    /// A machine that has its SETTINGS (limit `remote`) and, unless `authenticated` is false, a first 200.
    static func openMachine(
        remote: Int = 1000,
        authenticated: Bool = true,
        onUncertain: OnUncertain = .resend
    )
        -> Machine
    {
        var machine = Self.machine(onUncertain: onUncertain)
        _ = machine.settingsReceived(maximumConcurrentStreams: remote, now: Self.start)
        if authenticated {
            let (id, _) = machine.writing(Self.items(100...100), bearer: nil, now: Self.start)
            _ = machine.answer(id, status: 200, now: Self.start)
            _ = machine.takeResults()
        }
        return machine
    }

    // MARK: Credentials gate and SETTINGS

    @Test func oneStreamUntilTheFirstAnswerOtherThan403ThenTheServersLimitUnderOurCap() {
        var machine = Self.machine(maximumStreams: 100)
        #expect(machine.roomToWrite(isWritable: true) == 0, "nothing before the server's SETTINGS")
        let actions = machine.settingsReceived(maximumConcurrentStreams: 500, now: Self.start)
        #expect(actions.ready)
        #expect(machine.isReady)
        #expect(machine.roomToWrite(isWritable: true) == 1)
        #expect(machine.roomToWrite(isWritable: false) == 0)

        var (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        #expect(id == 1)
        #expect(machine.roomToWrite(isWritable: true) == 0, "the one stream is in flight")
        // A 403 does not open the gate (here a plain Forbidden-like reason that is not a credentials stop).
        _ = machine.answer(id, status: 403, body: errorBody(.init(rawValue: "SomethingElse")), now: Self.start)
        #expect(!machine.authenticated)
        #expect(machine.roomToWrite(isWritable: true) == 1)

        (id, _) = machine.writing(Self.items(2...2), bearer: nil, now: Self.start)
        #expect(id == 3)
        _ = machine.answer(id, status: 200, now: Self.start)
        #expect(machine.authenticated)
        #expect(machine.roomToWrite(isWritable: true) == 100, "min(server 500, our cap 100)")
        #expect(machine.settingsReceived(maximumConcurrentStreams: 40, now: Self.start) == Machine.Actions())
        #expect(machine.roomToWrite(isWritable: true) == 40)
    }

    @Test func aServerLimitOfZeroHoldsEvenTheFirstStream() {
        var machine = Self.machine(maximumStreams: 100)
        _ = machine.settingsReceived(maximumConcurrentStreams: 0, now: Self.start)
        #expect(machine.streamLimit == 0)
        #expect(machine.roomToWrite(isWritable: true) == 0, "no stream, not even the credentials' first")
        // The server opens up: the one stream of the credentials gate, then the limit once they pass.
        _ = machine.settingsReceived(maximumConcurrentStreams: 8, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 1)
        let (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        _ = machine.answer(id, status: 200, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 8)
        // Back to 0 after the credentials passed: nothing new.
        _ = machine.settingsReceived(maximumConcurrentStreams: 0, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 0)
    }

    @Test func settingsChangeTheLimitWhileStreamsAreInFlight() {
        var machine = Self.openMachine(remote: 10)
        #expect(machine.roomToWrite(isWritable: true) == 10)
        let (first, _) = machine.writing(Self.items(1...6), bearer: nil, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 4)
        // The server shrinks its limit below what is in flight: no new stream until enough finish.
        _ = machine.settingsReceived(maximumConcurrentStreams: 3, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 0)
        for index in 0..<4 { _ = machine.answer(first + Int32(2 * index), status: 200, now: Self.start) }
        #expect(machine.openStreams == 2)
        #expect(machine.roomToWrite(isWritable: true) == 1)
        // SETTINGS without the parameter keep the limit; a larger one raises it.
        _ = machine.settingsReceived(maximumConcurrentStreams: nil, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 1)
        _ = machine.settingsReceived(maximumConcurrentStreams: 50, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 48)
        #expect(machine.takeResults()?.outcomes.report.confirmed == 4)
    }

    @Test func withoutACapTheServersWholeLimitIsFilledAndFollowedBothWays() {
        var machine = Self.machine(maximumStreams: Int.max)
        _ = machine.settingsReceived(maximumConcurrentStreams: 1, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 1, "a token connection's first stream")
        var (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        // APNs lifts the limit after the first accepted request: all of it is used, a batch at a time.
        _ = machine.settingsReceived(maximumConcurrentStreams: 1000, now: Self.start)
        _ = machine.answer(id, status: 200, now: Self.start)
        var written = 0
        while machine.roomToWrite(isWritable: true) > 0 {
            let room = machine.roomToWrite(isWritable: true)
            #expect(room <= machine.configuration.batchLimit)
            // Items' tokens are made from one byte of the line: at most 255 at a time.
            let batch = min(room, 255)
            (id, _) = machine.writing(Self.items(1...batch), bearer: nil, now: Self.start)
            written += batch
        }
        #expect(written == 1000 && machine.openStreams == 1000)
        // Dropped to 1 after a rejection: nothing new until the flight is below it …
        _ = machine.settingsReceived(maximumConcurrentStreams: 1, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 0)
        _ = machine.answer(id, status: 200, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 0, "998 still in flight")
        // … and raised again: the room is there at once, with no answer needed first.
        _ = machine.settingsReceived(maximumConcurrentStreams: 1500, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == min(1500 - 999, machine.configuration.batchLimit))
    }

    @Test func batchesAreBoundedAndEveryAnswerIsRecordedOnce() {
        var machine = Self.machine(recordDeliveries: true)
        _ = machine.settingsReceived(maximumConcurrentStreams: nil, now: Self.start)
        var (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        _ = machine.answer(id, status: 200, apnsID: "a-1", now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 100, "no server limit: our cap")
        (id, _) = machine.writing(Self.items(2...4), bearer: nil, now: Self.start)
        _ = machine.answer(id, status: 400, body: errorBody(.badDeviceToken), now: Self.start)
        _ = machine.answer(
            id + 2,
            status: 410,
            body: errorBody(.unregistered, timestamp: 1_600_000_000_000),
            now: Self.start
        )
        _ = machine.answer(id + 4, status: 200, apnsID: "a-4", now: Self.start)
        // A second answer for a finished stream changes nothing.
        _ = machine.answer(id + 4, status: 200, apnsID: "again", now: Self.start)

        let readComplete = machine.readComplete()
        #expect(readComplete.giveBack && readComplete.writeRequests)
        let results = machine.takeResults()!
        #expect(results.finals == 4)
        #expect(results.retries.isEmpty)
        #expect(results.outcomes.report.confirmed == 2)
        #expect(results.outcomes.report.rejected == ["BadDeviceToken": 1, "Unregistered": 1])
        #expect(results.deliveries.map(\.apnsID) == ["a-1", "a-4"])
        #expect(results.outcomes.rejectedRows.map(\.line) == [2, 3])
        #expect(results.outcomes.rejectedRows.allSatisfy { $0.file == "tokens.csv" })
        // The suppression list: the 410 with its timestamp, the bad token with its reason.
        #expect(results.outcomes.unregistered.map(\.timestamp) == [nil, 1_600_000_000_000])
        #expect(results.outcomes.unregistered.map(\.reason) == ["BadDeviceToken", "Unregistered"])
        #expect(machine.takeResults() == nil)
        #expect(!machine.readComplete().giveBack)
    }

    // MARK: Retries

    @Test func tooManyRequestsAndUnavailableAreRetriedWithRetryAfterAndJitteredBackoffThenRejected() {
        var machine = Self.openMachine()
        var expected = SplitMix64(seed: Self.seed)
        let (id, _) = machine.writing(Self.items(1...2), bearer: nil, now: Self.start)
        _ = machine.answer(id, status: 429, body: errorBody(.tooManyRequests), retryAfter: 7, now: Self.start)
        _ = machine.answer(id + 2, status: 503, body: errorBody(.serviceUnavailable), now: Self.start)
        var results = machine.takeResults()!
        #expect(results.finals == 0)
        #expect(results.outcomes.report.resent == 2)
        #expect(results.retries.map(\.attempts) == [1, 1])
        #expect(results.retries.allSatisfy { !$0.unanswered }, "answered, if not accepted")
        // Retry-After (7 s) is above the jittered backoff (at most 100 ms after one attempt): it wins.
        let first = Self.retry.delay(attempts: 1, retryAfter: 7, random: expected.nextUnit())
        #expect(first == 7_000_000_000)
        #expect(results.retries[0].notBefore == Self.start + .nanoseconds(Int64(first)))
        // Without Retry-After: full jitter from the connection's generator, exactly.
        let second = Self.retry.delay(attempts: 1, retryAfter: nil, random: expected.nextUnit())
        #expect(second > 0 && second < 100_000_000)
        #expect(results.retries[1].notBefore == Self.start + .nanoseconds(Int64(second)))
        // The 429's Retry-After also holds the connection's new requests for those 7 s.
        #expect(machine.roomToWrite(isWritable: true) == 0)
        #expect(machine.tick(now: Self.start + .seconds(7)).writeRequests)

        // Sent again until the attempts run out; then the row is left unsent (the service never took it), not
        // rejected: the token may be good.
        var item = results.retries[1]
        for attempt in 2...3 {
            let (id, _) = machine.writing([item], bearer: nil, now: Self.start)
            _ = machine.answer(id, status: 503, body: errorBody(.serviceUnavailable), now: Self.start)
            results = machine.takeResults()!
            if attempt < 3 {
                #expect(results.retries.count == 1)
                let delay = Self.retry.delay(attempts: attempt, retryAfter: nil, random: expected.nextUnit())
                #expect(results.retries[0].notBefore == Self.start + .nanoseconds(Int64(delay)))
                item = results.retries[0]
            } else {
                #expect(results.retries.isEmpty)
                #expect(results.finals == 1)
                #expect(results.outcomes.report.rejected.isEmpty)
                #expect(results.outcomes.unsettledRows.map(\.outcome) == [.unsent])
                #expect(results.outcomes.unsettledRows.map(\.line) == [item.row.line])
            }
        }
    }

    @Test func theSameSeedGivesTheSameDelaysAndAnotherSeedOthers() {
        func delays(seed: UInt64) -> [NIODeadline] {
            var machine = Machine(
                configuration: Self.machine().configuration,
                outcomes: RowOutcomes(),
                random: SplitMix64(seed: seed),
                now: Self.start
            )
            _ = machine.settingsReceived(maximumConcurrentStreams: nil, now: Self.start)
            var (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
            _ = machine.answer(id, status: 200, now: Self.start)
            (id, _) = machine.writing(Self.items(2...9), bearer: nil, now: Self.start)
            for index in 0..<8 { _ = machine.answer(id + Int32(2 * index), status: 500, now: Self.start) }
            return machine.takeResults()!.retries.map(\.notBefore)
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
    }

    @Test func refusedStreamsAreRetriedAndOtherResetsAreUncertain() {
        var machine = Self.openMachine()
        let (id, _) = machine.writing(Self.items(1...3), bearer: nil, now: Self.start)
        var random = SplitMix64(seed: Self.seed)
        let refused = machine.streamClosed(streamID: id, code: .refusedStream, now: Self.start)
        #expect(refused.giveBack)
        _ = machine.streamClosed(streamID: id + 2, code: .internalError, now: Self.start)
        // A reset for a stream that is not in flight changes nothing.
        #expect(machine.streamClosed(streamID: 999, code: .cancel, now: Self.start) == Machine.Actions())
        let results = machine.takeResults()!
        #expect(results.retries.map(\.row.line) == [1, 2])
        #expect(results.retries.map(\.attempts) == [0, 0], "neither a refused stream nor a reset uses an attempt")
        #expect(results.retries.map(\.losses) == [0, 1], "a reset stream is a loss")
        #expect(results.retries.map(\.refusals) == [1, 0])
        let delay = Self.retry.delay(attempts: 1, retryAfter: nil, random: random.nextUnit())
        #expect(results.retries[0].notBefore == Self.start + .nanoseconds(Int64(delay)))
        #expect(results.retries[1].notBefore == Self.start, "an uncertain row goes again at once")
        #expect(results.retries.map(\.unanswered) == [false, true], "a refused stream was not processed")
        #expect(results.outcomes.report.resent == 2)
        #expect(results.outcomes.report.uncertainEvents == 1)
        #expect(machine.openStreams == 1)
    }

    @Test func refusedStreamsUseNoAttemptsAndAreBoundedOnTheirOwn() {
        var machine = Self.openMachine()
        var item = Self.items(1...1)[0]
        item.attempts = 1
        // 7 refusals (the 8th leaves the row unsent) leave the row's attempts as they were.
        for refusal in 1..<8 {
            let (id, _) = machine.writing([item], bearer: nil, now: Self.start)
            _ = machine.streamClosed(streamID: id, code: .refusedStream, now: Self.start)
            let results = machine.takeResults()!
            #expect(results.finals == 0 && results.retries.count == 1)
            item = results.retries[0]
            #expect(item.attempts == 1 && item.refusals == refusal)
        }
        // So a 503 still finds an attempt left (2 of 3) …
        var (id, _) = machine.writing([item], bearer: nil, now: Self.start)
        _ = machine.answer(id, status: 503, body: errorBody(.serviceUnavailable), now: Self.start)
        var results = machine.takeResults()!
        #expect(results.retries.map(\.attempts) == [2])
        item = results.retries[0]
        // … and a server that refuses every stream ends the row at its 8th refusal, not never: left unsent (never
        // processed), listed as unsettled, not rejected.
        (id, _) = machine.writing([item], bearer: nil, now: Self.start)
        _ = machine.streamClosed(streamID: id, code: .refusedStream, now: Self.start)
        results = machine.takeResults()!
        #expect(results.retries.isEmpty && results.finals == 1)
        #expect(results.outcomes.report.rejected.isEmpty)
        #expect(results.outcomes.unsettledRows.map(\.outcome) == [.unsent])
    }

    // MARK: Flight window (AIMD on 429)

    @Test func tooManyRequestsHalveTheFlightOncePerFlightAndAcceptedAnswersGrowItBack() {
        var machine = Self.openMachine()
        #expect(machine.flightWindow == nil && machine.streamLimit == 100, "min(server 1000, our cap 100)")
        let (first, _) = machine.writing(Self.items(1...100), bearer: nil, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 0)
        // A 429 cuts the flight of 100 to 50; other 429s of the same flight cut nothing more.
        _ = machine.answer(first, status: 429, body: errorBody(.tooManyRequests), now: Self.start)
        #expect(machine.flightWindow == 50 && machine.streamLimit == 50)
        _ = machine.answer(first + 2, status: 429, body: errorBody(.tooManyRequests), now: Self.start)
        #expect(machine.flightWindow == 50)
        #expect(machine.roomToWrite(isWritable: true) == 0, "98 in flight, window 50")
        // Each accepted answer adds 8 / window: 8 streams per window's worth.
        var expected = 50.0
        for index in 2..<50 {
            _ = machine.answer(first + Int32(2 * index), status: 200, now: Self.start)
            expected += 8 / expected
        }
        #expect(machine.flightWindow == Int(expected))
        #expect(machine.openStreams == 50)
        #expect(machine.roomToWrite(isWritable: true) == Int(expected) - 50)

        // A stream written after the cut may cut again: its flight (under the window) halves.
        let room = machine.roomToWrite(isWritable: true)
        let (next, _) = machine.writing(Self.items(101...(100 + room)), bearer: nil, now: Self.start)
        _ = machine.answer(next, status: 429, body: errorBody(.tooManyRequests), now: Self.start)
        #expect(machine.flightWindow == Int(expected) / 2)
        // A 429 for a stream of the old flight does not.
        _ = machine.answer(first + 2 * 50, status: 429, body: errorBody(.tooManyRequests), now: Self.start)
        #expect(machine.flightWindow == Int(expected) / 2)
        let results = machine.takeResults()!
        #expect(results.flightCuts == 2)
        #expect(results.smallestFlightWindow == Int(expected) / 2)
        #expect(results.retries.count == 4, "every 429 is still retried")
        #expect(results.outcomes.report.confirmed == 48)
    }

    @Test func retryAfterHoldsNewRequestsAndTheWindowGoesAwayAtTheServersLimit() {
        var machine = Self.openMachine(remote: 4)
        let (first, _) = machine.writing(Self.items(1...4), bearer: nil, now: Self.start)
        _ = machine.answer(first, status: 429, body: errorBody(.tooManyRequests), retryAfter: 2, now: Self.start)
        #expect(machine.flightWindow == 2)
        #expect(machine.holdUntil == Self.start + .seconds(2))
        for index in 1..<4 { _ = machine.answer(first + Int32(2 * index), status: 200, now: Self.start) }
        // 2 + 8/2 reaches the server's 4 at the first accepted answer: no window of its own any more.
        #expect(machine.flightWindow == nil && machine.streamLimit == 4)
        #expect(machine.roomToWrite(isWritable: true) == 0, "held by Retry-After")
        #expect(!machine.tick(now: Self.start + .seconds(1)).writeRequests)
        #expect(machine.roomToWrite(isWritable: true) == 0)
        #expect(machine.tick(now: Self.start + .seconds(2)).writeRequests)
        #expect(machine.holdUntil == nil)
        #expect(machine.roomToWrite(isWritable: true) == 4)
    }

    // MARK: Credentials

    @Test func expiredProviderTokenIsRenewedOnceAndSentAgainWithoutBackoff() {
        var machine = Self.openMachine()
        let bearer = ProviderToken.Bearer(authorization: "bearer old", issuedAt: 1_000)
        let (id, _) = machine.writing(Self.items(1...2), bearer: bearer, now: Self.start)
        let later = Self.start + .seconds(1)
        let actions = machine.answer(id, status: 403, body: errorBody(.expiredProviderToken), now: later)
        #expect(actions.renewToken?.bearer == bearer)
        #expect(actions.renewToken?.item.row.line == 1)
        #expect(actions.stopJob == nil)
        #expect(machine.takeResults() == nil, "the row waits for the renewal")

        let renewed = machine.tokenRenewed(actions.renewToken!, result: .renewed, now: later)
        #expect(renewed.giveBack && renewed.stopJob == nil)
        var results = machine.takeResults()!
        #expect(results.retries.map(\.attempts) == [1])
        #expect(results.retries[0].notBefore == later)
        #expect(results.outcomes.report.resent == 1)

        // The clocks disagree: the renewed token is refused as expired again; the job stops, and the row (refused
        // for the token, never seen by the device) is left unsent, not rejected.
        let again = machine.answer(id + 2, status: 403, body: errorBody(.expiredProviderToken), now: later)
        let refused = machine.tokenRenewed(again.renewToken!, result: .refused("the clocks disagree"), now: later)
        #expect(refused.stopJob == HTTP2JobStop(reason: "ExpiredProviderToken", message: "the clocks disagree"))
        results = machine.takeResults()!
        #expect(results.finals == 1 && results.retries.isEmpty)
        #expect(results.outcomes.report.rejected.isEmpty)
        #expect(results.outcomes.unsettledRows.map(\.line) == [2])
        #expect(results.outcomes.unsettledRows.map(\.outcome) == [.unsent])
    }

    @Test func expiredProviderTokenWithoutATokenStopsTheJobAndLeavesTheRowUnsent() {
        var machine = Self.openMachine()
        let (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        let actions = machine.answer(id, status: 403, body: errorBody(.expiredProviderToken), now: Self.start)
        #expect(actions.renewToken == nil)
        #expect(actions.stopJob?.reason == "ExpiredProviderToken")
        let results = machine.takeResults()!
        #expect(results.outcomes.report.rejected.isEmpty)
        #expect(results.outcomes.unsettledRows.map(\.outcome) == [.unsent])
    }

    @Test func credentialErrorsStopTheJobWithTheReason() {
        var machine = Self.openMachine(authenticated: false)
        let (id, _) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        let actions = machine.answer(id, status: 403, body: errorBody(.invalidProviderToken), now: Self.start)
        #expect(actions.stopJob?.reason == "InvalidProviderToken")
        #expect(actions.stopJob?.message.contains("key id") == true)
        #expect(!machine.authenticated)
        var results = machine.takeResults()!
        #expect(results.finals == 1)
        #expect(results.outcomes.report.rejected.isEmpty, "refused for the token: the device never saw it")
        #expect(results.outcomes.unsettledRows.map(\.outcome) == [.unsent])

        // TooManyProviderTokenUpdates too; a refusal of the certificate rejects the row.
        let (updates, _) = machine.writing(Self.items(2...2), bearer: nil, now: Self.start)
        let tooMany = machine.answer(
            updates,
            status: 429,
            body: errorBody(.tooManyProviderTokenUpdates),
            now: Self.start
        )
        #expect(tooMany.stopJob?.reason == "TooManyProviderTokenUpdates")
        results = machine.takeResults()!
        #expect(results.outcomes.report.rejected.isEmpty && results.outcomes.report.resent == 0)
        #expect(results.outcomes.unsettledRows.map(\.line) == [2])
        let (certificate, _) = machine.writing(Self.items(3...3), bearer: nil, now: Self.start)
        _ = machine.answer(certificate, status: 403, body: errorBody(.badCertificate), now: Self.start)
        #expect(machine.takeResults()!.outcomes.report.rejected == ["BadCertificate": 1])

        // A GOAWAY whose debug data names a credentials reason stops the job too.
        var other = Self.openMachine()
        let goAway = other.goAwayReceived(lastStreamID: 0, reason: .badCertificateEnvironment, now: Self.start)
        #expect(goAway.stopJob?.reason == "BadCertificateEnvironment")
        #expect(goAway.close)
    }

    // MARK: GOAWAY and stream ids

    @Test func goAwaySendsStreamsAboveTheLastIdBackWithoutAnAttemptAndClosesWhenTheRestAreAnswered() {
        var machine = Self.openMachine()
        let (first, _) = machine.writing(Self.items(1...5), bearer: nil, now: Self.start)
        let lastProcessed = first + 2  // rows 1 and 2 were processed
        let actions = machine.goAwayReceived(lastStreamID: lastProcessed, reason: nil, now: Self.start)
        #expect(actions.retire, "the pool opens a replacement now")
        #expect(actions.giveBack)
        #expect(!actions.close, "two streams still finish")
        #expect(actions.stopJob == nil)
        #expect(machine.state == .draining(lastStreamID: lastProcessed))
        #expect(machine.roomToWrite(isWritable: true) == 0)
        var results = machine.takeResults()!
        #expect(results.retries.map(\.row.line) == [3, 4, 5])
        #expect(results.retries.allSatisfy { $0.attempts == 0 && $0.notBefore == .uptimeNanoseconds(0) })
        #expect(results.outcomes.report.resent == 3)
        #expect(results.outcomes.report.uncertainEvents == 0)
        #expect(results.finals == 0)

        // A second GOAWAY lowers the last id but asks for no second replacement.
        let second = machine.goAwayReceived(lastStreamID: first + 2, reason: nil, now: Self.start)
        #expect(!second.retire)
        #expect(machine.answer(first, status: 200, now: Self.start).close == false)
        #expect(machine.answer(first + 2, status: 200, now: Self.start).close, "the last stream closes it")
        #expect(machine.state == .closed)
        results = machine.takeResults()!
        #expect(results.finals == 2)
        #expect(results.outcomes.report.confirmed == 2)
    }

    @Test func usedUpStreamIdsRetireTheConnection() {
        var machine = Self.machine(firstStreamID: Int32.max - 4)
        _ = machine.settingsReceived(maximumConcurrentStreams: nil, now: Self.start)
        var (id, actions) = machine.writing(Self.items(1...1), bearer: nil, now: Self.start)
        #expect(id == Int32.max - 4)
        #expect(!actions.retire)
        _ = machine.answer(id, status: 200, now: Self.start)
        #expect(machine.roomToWrite(isWritable: true) == 2, "ids Int32.max - 2 and Int32.max are left")
        (id, actions) = machine.writing(Self.items(2...3), bearer: nil, now: Self.start)
        #expect(actions.retire)
        #expect(!actions.close)
        #expect(machine.state == .draining(lastStreamID: Int32.max))
        #expect(machine.roomToWrite(isWritable: true) == 0)
        _ = machine.answer(id, status: 200, now: Self.start)
        #expect(machine.answer(Int32.max, status: 200, now: Self.start).close)
        #expect(machine.takeResults()?.outcomes.report.confirmed == 3)
    }

    // MARK: Deadlines, PING and close

    @Test func aMissedDeadlineResetsTheStreamThenPingsThenClosesWithoutAnAnswer() {
        var machine = Self.openMachine()
        let (first, _) = machine.writing(Self.items(1...2), bearer: nil, now: Self.start)
        let later = Self.start + .seconds(8)
        let (third, _) = machine.writing(Self.items(3...3), bearer: nil, now: later)
        #expect(machine.tick(now: Self.start + .seconds(9)) == Machine.Actions(), "no deadline passed yet")

        // The first two requests missed their deadline (10 s): reset, uncertain, and a PING checks the connection.
        let atDeadline = Self.start + .seconds(10)
        let actions = machine.tick(now: atDeadline)
        #expect(actions.resetStreams == [first, first + 2])
        #expect(actions.sendPing)
        #expect(actions.giveBack)
        #expect(!actions.close)
        var results = machine.takeResults()!
        #expect(results.retries.map(\.row.line) == [1, 2])
        #expect(results.retries.allSatisfy { $0.attempts == 0 && $0.losses == 1 && $0.notBefore == atDeadline })
        #expect(results.outcomes.report.uncertainEvents == 2)
        #expect(results.outcomes.report.resent == 2)
        #expect(machine.roomToWrite(isWritable: true) == 0, "no new rows while the PING is unanswered")
        #expect(!machine.tick(now: atDeadline + .seconds(5)).close, "not past the PING timeout yet")

        // No PING answer in time: close; the row still in flight goes back, uncertain.
        let closing = machine.tick(now: atDeadline + .seconds(6))
        #expect(closing.close)
        #expect(closing.note?.contains("no PING answer") == true)
        #expect(closing.giveBack)
        #expect(machine.state == .closed)
        results = machine.takeResults()!
        #expect(results.retries.map(\.row.line) == [3])
        #expect(results.outcomes.report.uncertainEvents == 1)
        #expect(machine.roomToWrite(isWritable: true) == 0)
        // A late answer for a settled stream is ignored.
        _ = machine.answer(third, status: 200, now: atDeadline + .seconds(7))
        #expect(machine.takeResults() == nil)
        #expect(machine.tick(now: atDeadline + .seconds(8)) == Machine.Actions())
    }

    @Test func aSilentConnectionIsPingedAndAnAnswerLetsItGoOn() {
        var machine = Self.openMachine()
        #expect(!machine.tick(now: Self.start + .seconds(59)).sendPing)
        // Frames count as activity.
        machine.frameReceived(now: Self.start + .seconds(30))
        #expect(!machine.tick(now: Self.start + .seconds(89)).sendPing)
        #expect(machine.tick(now: Self.start + .seconds(90)).sendPing)
        #expect(!machine.tick(now: Self.start + .seconds(91)).sendPing, "one PING at a time")
        #expect(machine.roomToWrite(isWritable: true) == 0)
        #expect(machine.pingAcknowledged(now: Self.start + .seconds(92)).writeRequests)
        #expect(machine.roomToWrite(isWritable: true) > 0)
        #expect(!machine.tick(now: Self.start + .seconds(100)).close)
    }

    @Test func uncertainRowsFollowThePolicy() {
        var machine = Self.openMachine(onUncertain: .report)
        _ = machine.writing(Self.items(1...2), bearer: nil, now: Self.start)
        let actions = machine.closed(now: Self.start)
        #expect(actions.giveBack)
        #expect(machine.state == .closed)
        let results = machine.takeResults()!
        #expect(results.retries.isEmpty)
        #expect(results.finals == 2)
        #expect(results.outcomes.report.uncertain == 2)
        #expect(results.outcomes.report.uncertainEvents == 2)
        #expect(results.outcomes.report.resent == 0)

        // With resend, a row is sent again only while it has losses left (its attempts are the answers').
        var resend = Self.openMachine(onUncertain: .resend)
        var item = Self.items(1...1)[0]
        item.attempts = Self.retry.maximumAttempts - 1
        item.losses = Self.machine().configuration.maximumLosses - 1
        _ = resend.writing([item], bearer: nil, now: Self.start)
        _ = resend.closed(now: Self.start)
        let last = resend.takeResults()!
        #expect(last.retries.isEmpty)
        #expect(last.outcomes.report.uncertain == 1)
    }

    @Test func aFailedConnectionClosesAndItsRowsGoBackAtOnce() {
        var machine = Self.openMachine()
        _ = machine.writing(Self.items(1...3), bearer: nil, now: Self.start)
        let later = Self.start + .seconds(1)
        let actions = machine.failed("TLS alert", now: later)
        #expect(actions.close && actions.giveBack)
        #expect(actions.note == "TLS alert")
        #expect(machine.state == .closed)
        let results = machine.takeResults()!
        #expect(results.retries.map(\.row.line) == [1, 2, 3], "in the order they were sent")
        #expect(results.retries.allSatisfy { $0.notBefore == later && $0.attempts == 0 && $0.losses == 1 })
        #expect(results.outcomes.report.uncertainEvents == 3)
        // The close that follows finds nothing left to settle.
        #expect(!machine.closed(now: later).giveBack)
        #expect(machine.takeResults() == nil)
    }

    @Test func openingCountsAsActivityForThePingInterval() {
        var machine = Self.machine()
        machine.opened(now: Self.start + .seconds(30))
        #expect(!machine.tick(now: Self.start + .seconds(80)).sendPing)
        #expect(machine.tick(now: Self.start + .seconds(90)).sendPing)
    }

    @Test func withNoRowsReadyOneWakeUpIsScheduledForTheNextDelayedRowOrSoon() {
        var machine = Self.openMachine()
        #expect(machine.noRowsReady(now: Self.start, nextDelayed: nil) == Self.start + .milliseconds(20))
        #expect(machine.noRowsReady(now: Self.start, nextDelayed: nil) == nil, "one wake-up at a time")
        #expect(machine.wokeUp().writeRequests)
        let due = Self.start + .milliseconds(5)
        #expect(machine.noRowsReady(now: Self.start, nextDelayed: due) == due)
        _ = machine.wokeUp()
        #expect(machine.noRowsReady(now: Self.start, nextDelayed: Self.start) == Self.start + .milliseconds(1))
        _ = machine.wokeUp()
        _ = machine.goAwayReceived(lastStreamID: 0, reason: nil, now: Self.start)
        #expect(machine.noRowsReady(now: Self.start, nextDelayed: nil) == nil, "a retired connection takes no rows")
    }
}

extension HTTP2ConnectionMachine {
    /// A whole answer on one stream: HEADERS, then DATA with the body when there is one.
    fileprivate mutating func answer(
        _ streamID: Int32,
        status: Int,
        apnsID: String? = nil,
        body: [UInt8] = [],
        retryAfter: Int64? = nil,
        now: NIODeadline
    ) -> Actions {
        let headers = self.headersReceived(
            streamID: streamID,
            status: status,
            apnsID: apnsID,
            retryAfter: retryAfter,
            endStream: body.isEmpty,
            now: now
        )
        guard !body.isEmpty else { return headers }
        return self.dataReceived(streamID: streamID, bytes: ByteBuffer(bytes: body), endStream: true, now: now)
    }
}

extension HTTP2ConnectionMachine.Results: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.finals == rhs.finals && lhs.retries == rhs.retries && lhs.deliveries == rhs.deliveries
            && lhs.outcomes.report == rhs.outcomes.report
    }
}
