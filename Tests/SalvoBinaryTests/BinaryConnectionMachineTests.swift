import APNSWire
import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

/// Drives a `BinaryConnectionMachine` the way `Shard` does, with no socket: rows come from an array, written
/// frames are recorded, the ciphertext offsets are counted by hand, and time is whatever the test says.
private struct Harness {
    var machine: BinaryConnectionMachine
    var rows: [TokenRow]
    var handedOut = 0
    let chunk: Int
    /// The input fails when this many rows have been handed out (the next read fails).
    var inputFailsAt: Int?
    /// (line, identifier) of every frame written on the current connection, in order.
    var written: [(line: Int, identifier: UInt32)] = []
    /// Lines of every frame written over all connections.
    var allLines: [Int] = []
    var barrier: UInt32?
    /// Ciphertext offset of the current connection (1 byte per frame, for simplicity).
    var offset = 0
    var unflushed = 0
    var now: UInt64 = 10_000_000_000
    var flushes = 0
    /// Every reconnect delay the machine asked for after a close.
    var delays: [UInt64] = []
    /// What `pump` tells the machine the connection holds unsent.
    var queuedBytes = 0

    init(
        rows count: Int,
        window: Int = 1024,
        flushBytes: Int = 4,
        command: FrameCommand = .framed,
        retries: Int = 2,
        onUncertain: OnUncertain = .resend,
        reconnect: ReconnectPolicy = ReconnectPolicy(
            initialDelay: .microseconds(1),
            maximumDelay: .microseconds(10),
            minimumInterval: .zero,
            maximumAttempts: 3
        ),
        expiry: UInt32 = 0,
        chunk: Int = 3
    ) {
        self.rows = (0..<count).map { index in
            TokenRow(
                token: token(UInt8(truncatingIfNeeded: index)),
                line: index + 2,
                reference: RowReference(file: 0, offset: index)
            )
        }
        self.chunk = chunk
        self.machine = BinaryConnectionMachine(
            configuration: .init(
                gateway: "gateway:2195",
                command: command,
                frameByteCount: 1,
                expiry: expiry,
                flush: FlushPolicy(bytes: flushBytes, delay: .milliseconds(1)),
                reconnect: reconnect,
                settleNanoseconds: 1_000_000_000,
                peerReceiveBufferBytes: 0,
                windowCapacity: window,
                processingErrorRetries: retries,
                onUncertain: onUncertain,
                queueLimitBytes: 1 << 30
            ),
            files: ["tokens.csv"],
            seed: 7
        )
    }

    /// Reads a journaled row's token again, as the token source would.
    static func resolve(_ journaled: SentWindow.Journaled) -> DeviceToken {
        token(UInt8(truncatingIfNeeded: journaled.reference.offset))
    }

    /// Connects (the machine must ask for it) and opens.
    mutating func open() {
        let action = self.machine.machineStartOrReconnect(now: self.now)
        #expect(action == .connect)
        _ = self.machine.opened()
        self.written = []
        self.barrier = nil
        self.offset = 0
    }

    /// Writes until the machine waits, flushing as asked; returns the action it stopped at.
    @discardableResult
    mutating func pump() -> BinaryConnectionMachine.Action {
        var action = BinaryConnectionMachine.Action.write
        while true {
            switch action {
            case .write:
                break
            case .needRows:
                if let failsAt = self.inputFailsAt, self.handedOut >= failsAt {
                    action = self.machine.inputFailed("tokens.csv: line \(failsAt + 2): read failed")
                    continue
                }
                if self.handedOut < self.rows.count {
                    let end = min(self.rows.count, self.handedOut + self.chunk)
                    self.machine.rowsArrived(self.rows[self.handedOut..<end])
                    self.handedOut = end
                } else {
                    self.machine.sourceExhausted()
                }
            case .flush:
                self.flush()
            case .writeBarrier(let identifier):
                self.barrier = identifier
                self.unflushed += 1
                self.flush()
                return action
            default:
                return action
            }
            action = self.machine.write(queuedBytes: self.queuedBytes, now: self.now, wallSeconds: 1_000) {
                row,
                identifier in
                self.written.append((row.line, identifier))
                self.allLines.append(row.line)
                self.unflushed += 1
            }
        }
    }

    mutating func flush() {
        self.flushes += 1
        let start = self.offset
        self.offset += self.unflushed
        self.machine.flushed(bytes: self.unflushed, ciphertextStart: start, ciphertextEnd: self.offset, now: self.now)
        self.unflushed = 0
    }

    mutating func answer(_ status: ErrorStatus, _ identifier: UInt32) -> BinaryConnectionMachine.Action {
        self.machine.received(
            ErrorResponse(status: status, identifier: identifier),
            now: self.now,
            resolve: Self.resolve
        )
    }

    mutating func close(
        _ cause: BinaryConnectionMachine.CloseCause,
        sentThrough: Int? = nil,
        acknowledged: Int? = nil
    )
        -> BinaryConnectionMachine.Action
    {
        let action = self.machine.closed(
            cause,
            sentThrough: sentThrough ?? self.offset,
            acknowledged: acknowledged,
            now: self.now,
            resolve: Self.resolve
        )
        if case .reconnect(let delay) = action { self.delays.append(delay) }
        return action
    }

    var report: JobReport { self.machine.outcomes.report }
}

extension BinaryConnectionMachine {
    /// `start` for the first connection, `reconnectDue` after.
    fileprivate mutating func machineStartOrReconnect(now: UInt64) -> Action {
        self.outcomes.report.reconnects == 0 && self.outcomes.report.written == 0 && self.window.isEmpty
            && self.failures == 0
            ? self.start(now: now) : self.reconnectDue(now: now)
    }
}

@Suite(.tags(.pure), .runs(.pure)) struct BinaryConnectionMachineTests {
    @Test func writesEveryRowInBatchesThenTheBarrierWhoseAnswerConfirmsThemAll() {
        var harness = Harness(rows: 10)
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 11))
        #expect(harness.written.map(\.line) == Array(2...11))
        #expect(harness.written.map(\.identifier) == Array(1...10))
        #expect(harness.flushes == 4, "batches of 4 bytes: 4, 4, 2 rows, then the barrier")
        #expect(harness.pump() == .none, "nothing goes after the barrier")
        #expect(harness.answer(.missingDeviceToken, 11) == .close)
        #expect(harness.report.confirmed == 10)
        #expect(harness.report.rejectedTotal == 0)
        #expect(harness.close(.local) == .finish)
    }

    @Test func anInputThatFailsSettlesTheRowsReadThenFailsWithItsError() {
        var harness = Harness(rows: 10)
        harness.inputFailsAt = 6
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 7), "the rows read go out, then the barrier")
        #expect(harness.written.map(\.line) == Array(2...7))
        #expect(harness.answer(.missingDeviceToken, 7) == .close)
        #expect(harness.report.confirmed == 6, "what the gateway took is counted")
        #expect(harness.close(.local) == .fail(JobError(.input, "tokens.csv: line 8: read failed")))
    }

    @Test func anInputThatFailsBeforeAnyRowFailsOnceTheConnectionIsBack() {
        var harness = Harness(rows: 10)
        harness.inputFailsAt = 0
        harness.open()
        #expect(harness.pump() == .fail(JobError(.input, "tokens.csv: line 2: read failed")))
        #expect(harness.written.isEmpty && harness.report.confirmed == 0)
    }

    @Test func anErrorConfirmsBeforeRejectsTheRowAndRewindsAfter() {
        var harness = Harness(rows: 10)
        harness.open()
        harness.pump()
        #expect(harness.answer(.invalidToken, 4) == .close)
        #expect(harness.report.confirmed == 3)
        #expect(harness.report.rejected == ["InvalidToken": 1])
        #expect(harness.report.resent == 6)
        #expect(harness.machine.outcomes.rejectedRows.map(\.line) == [5])
        #expect(harness.machine.outcomes.rejectedRows.first?.file == "tokens.csv")
        guard case .reconnect = harness.close(.local) else {
            Issue.record("a closed connection with rows left reconnects")
            return
        }
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 7))
        #expect(harness.written.map(\.line) == Array(6...11), "the rows after the failed one, in order, first")
        #expect(harness.answer(.missingDeviceToken, 7) == .close)
        #expect(harness.report.confirmed == 9)
        #expect(harness.close(.local) == .finish)
        #expect(harness.report.delivered + harness.report.rejectedTotal == 10)
    }

    @Test func shutdownNamesTheLastGoodRow() {
        var harness = Harness(rows: 6)
        harness.open()
        harness.pump()
        #expect(harness.answer(.shutdown, 4) == .close)
        #expect(harness.report.confirmed == 4)
        #expect(harness.report.rejectedTotal == 0)
        #expect(harness.report.resent == 2)
        #expect(harness.machine.flightLimit == 1024, "a shutdown is no error of a row: the flight stays")
    }

    @Test func statusZeroRefusesNothing() {
        var harness = Harness(rows: 6, onUncertain: .report)
        harness.open()
        harness.pump()
        _ = harness.answer(.noErrors, 3)
        #expect(harness.report.rejectedTotal == 0, "no errors encountered is not a refusal")
        #expect(harness.report.confirmed == 2)
        #expect(harness.report.uncertain == 1, "whether the gateway kept row 3 is unknown")
        #expect(harness.report.resent == 3)
    }

    @Test func processingErrorsAreRetriedThenRejected() {
        var harness = Harness(rows: 1, retries: 2)
        for attempt in 1...3 {
            harness.open()
            harness.pump()
            #expect(harness.written.map(\.line) == [2])
            _ = harness.answer(.processingError, 1)
            let action = harness.close(.local)
            if attempt < 3 {
                #expect(harness.report.rejectedTotal == 0)
                #expect(harness.report.resent == attempt)
                guard case .reconnect = action else {
                    Issue.record("retry \(attempt) reconnects")
                    return
                }
            } else {
                #expect(harness.report.rejected == ["ProcessingError": 1])
                #expect(action == .finish)
            }
        }
    }

    /// Errors halve the flight (what is written after a failed row is discarded); a full flight that stays quiet a
    /// little longer than the gateway takes to answer doubles. No barrier on the way: a healthy connection is not
    /// closed on purpose.
    @Test func theFlightHalvesOnErrorsAndGrowsWhenQuietWithoutABarrier() {
        var harness = Harness(rows: 20_000, window: 2048, flushBytes: 64, chunk: 512)
        harness.open()
        #expect(
            harness.pump() == .scheduleFlush(afterNanoseconds: 2_000_000_000),
            "a full window waits for rows to be presumed: no barrier"
        )
        #expect(harness.written.count == 2048)
        harness.now += 40_000_000
        _ = harness.answer(.invalidToken, 1000)
        #expect(harness.machine.flightLimit == 1024, "an error far into the flight halves it")
        #expect(harness.machine.answerLatency == 40_000_000, "from writing the failed row's batch to its answer")
        _ = harness.close(.local)
        harness.open()
        #expect(
            harness.pump() == .scheduleFlush(afterNanoseconds: 50_000_000),
            "a full flight waits a quarter longer than the answer time"
        )
        #expect(harness.written.count == 1024, "the next connection carries the smaller flight")
        harness.now += 49_000_000
        #expect(harness.machine.flushDue() == .write)
        #expect(harness.pump() == .scheduleFlush(afterNanoseconds: 1_000_000), "not quiet long enough yet")
        #expect(harness.written.count == 1024)
        harness.now += 1_000_000
        #expect(harness.machine.flushDue() == .write)
        harness.pump()
        #expect(harness.machine.flightLimit == 2048, "quiet: the flight doubles")
        #expect(harness.written.count == 2048)
        harness.now += 40_000_000
        _ = harness.answer(.invalidToken, 301)
        #expect(harness.machine.flightLimit == 600, "errors closer than a quarter flight: twice their spacing at once")
        _ = harness.close(.local)
        harness.open()
        harness.pump()
        #expect(harness.written.count == 600)
        for _ in 0..<6 {
            harness.now += 40_000_000
            _ = harness.answer(.invalidToken, 10)
            _ = harness.close(.local)
            harness.open()
            harness.pump()
        }
        #expect(harness.machine.flightLimit == BinaryConnectionMachine.minimumFlight, "never below the minimum")
        #expect(harness.written.count == 256)
        #expect(harness.barrier == nil)
        #expect(harness.report.reconnectCauses[ReconnectCause.barrier] == nil)
    }

    /// A window nothing settles (too small to outgrow the gateway's receive buffer, say) gets a barrier after twice
    /// the settle time, and at most `deliberateClosesPerMinute` of them a minute.
    @Test func aWindowThatNeverSettlesGetsABarrierAfterALongQuietWithinTheBudget() {
        var harness = Harness(rows: 1000, window: 4)
        let minute: UInt64 = 60_000_000_000
        let start = harness.now
        for round in 0..<BinaryConnectionMachine.deliberateClosesPerMinute {
            harness.open()
            #expect(harness.pump() == .scheduleFlush(afterNanoseconds: 2_000_000_000), "round \(round)")
            harness.now += 2_000_000_000
            #expect(harness.machine.flushDue() == .write)
            guard case .writeBarrier(let identifier) = harness.pump() else {
                Issue.record("a long quiet full window gets the barrier")
                return
            }
            #expect(identifier == 5)
            #expect(harness.answer(.missingDeviceToken, identifier) == .close)
            guard case .reconnect = harness.close(.local) else {
                Issue.record("rows are left: the machine reconnects")
                return
            }
        }
        harness.open()
        #expect(harness.pump() == .scheduleFlush(afterNanoseconds: 2_000_000_000))
        harness.now += 2_000_000_000
        #expect(harness.machine.flushDue() == .write)
        let firstBarrierAt = start + 2_000_000_000
        #expect(
            harness.pump() == .scheduleFlush(afterNanoseconds: firstBarrierAt + minute - harness.now),
            "the budget is spent: the next barrier waits until the first is a minute old"
        )
        #expect(harness.report.reconnectCauses == [ReconnectCause.barrier: 6])
    }

    @Test func rowsArePresumedOnlyAfterTheGatewayReadThemAndTheSettleTimePassed() {
        var harness = Harness(rows: 8, command: .simple)
        harness.open()
        harness.pump()
        #expect(harness.written.count == 8)
        #expect(harness.machine.tick(acknowledged: 4, now: harness.now) == .none)
        #expect(harness.report.presumed == 0, "read just now: not yet")
        harness.now += 1_000_000_001
        #expect(harness.machine.tick(acknowledged: 8, now: harness.now) == .write)
        #expect(harness.report.presumed == 4, "the first half was read a settle time ago")
        harness.now += 1_000_000_001
        #expect(harness.machine.tick(acknowledged: 8, now: harness.now) == .finish)
        #expect(harness.report.presumed == 8)
    }

    @Test func aResetTellsUnsentRowsFromWrittenOnes() {
        var harness = Harness(rows: 10, flushBytes: 4, onUncertain: .report)
        harness.open()
        harness.pump()
        // 10 rows in batches at offsets 0, 4, 8 and the barrier at 10; the kernel took 6 bytes.
        let action = harness.close(.remote("reset"), sentThrough: 6)
        #expect(harness.report.uncertain == 8, "rows 1–8 left the process: they may have arrived")
        #expect(harness.report.uncertainEvents == 8)
        #expect(harness.report.resent == 0, "rows 9 and 10 never left: written again, not counted")
        guard case .reconnect = action else {
            Issue.record("the shard reconnects for the unsent rows")
            return
        }
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 3))
        #expect(harness.written.map(\.line) == [10, 11])
    }

    /// The report says why each reconnect happened: a dirty token list shows as `InvalidToken`, a gateway that
    /// paces connects as closes before anything was written.
    @Test func reconnectsAreCountedByWhatEndedTheConnectionBefore() {
        var harness = Harness(rows: 10)
        harness.open()
        harness.pump()
        #expect(harness.answer(.invalidToken, 4) == .close)
        guard case .reconnect = harness.close(.local) else {
            Issue.record("rows are left: the machine reconnects")
            return
        }
        // (The harness's `open` would start afresh here: nothing is in the window and nothing failed.)
        #expect(harness.machine.reconnectDue(now: harness.now) == .connect)
        _ = harness.machine.opened()
        harness.offset = 0
        guard case .reconnect = harness.close(.remote("closed by the peer"), sentThrough: 0) else {
            Issue.record("a connection closed before anything was written is reconnected")
            return
        }
        harness.open()
        harness.pump()
        guard case .reconnect = harness.close(.remote("reset")) else {
            Issue.record("a reset with rows written reconnects")
            return
        }
        harness.open()
        #expect(harness.report.reconnects == 3)
        #expect(
            harness.report.reconnectCauses == [
                "InvalidToken": 1, ReconnectCause.closedOnConnect: 1, ReconnectCause.closedWithoutAnswer: 1,
            ]
        )
        #expect(harness.report.summary.contains("after InvalidToken: 1"))
    }

    /// A barrier before the end closes the connection on purpose: its reconnect is named so.
    @Test func aReconnectAfterABarrierIsNamedSo() {
        var harness = Harness(rows: 10, window: 4)
        harness.open()
        harness.pump()
        harness.now += 2_000_000_000
        _ = harness.machine.flushDue()
        #expect(harness.pump() == .writeBarrier(identifier: 5))
        #expect(harness.answer(.missingDeviceToken, 5) == .close)
        guard case .reconnect = harness.close(.local) else {
            Issue.record("rows are left: the machine reconnects")
            return
        }
        #expect(harness.machine.reconnectDue(now: harness.now) == .connect)
        #expect(harness.report.reconnectCauses == [ReconnectCause.barrier: 1])
    }

    @Test func uncertainRowsAreResentWithTheResendPolicy() {
        var harness = Harness(rows: 4, onUncertain: .resend)
        harness.open()
        harness.pump()
        _ = harness.close(.remote("reset"))
        #expect(harness.report.uncertain == 0)
        #expect(harness.report.uncertainEvents == 4)
        #expect(harness.report.resent == 4)
        harness.open()
        harness.pump()
        #expect(harness.written.map(\.line) == [2, 3, 4, 5])
    }

    @Test func connectionsThatSettleNothingEventuallyGiveUp() {
        var harness = Harness(rows: 4)
        for attempt in 1...3 {
            harness.open()
            harness.pump()
            let action = harness.close(.remote("reset"))
            if attempt < 3 {
                guard case .reconnect = action else {
                    Issue.record("attempt \(attempt) reconnects")
                    return
                }
            } else {
                guard case .fail(let error) = action else {
                    Issue.record("three connections in a row that settled nothing end the job")
                    return
                }
                #expect(error.code == .unreachable)
                #expect(
                    error.message.contains("gateway:2195 closed connections without settling anything (3 connections")
                )
            }
        }
    }

    @Test func aPeerThatAnswersJunkEndsTheJobAtOnce() {
        var harness = Harness(rows: 4)
        harness.open()
        harness.pump()
        guard case .fail(let error) = harness.machine.receivedGarbage("first bytes 000012") else {
            Issue.record("junk is not a gateway: retrying cannot help")
            return
        }
        #expect(error.code == .unreachable)
        #expect(error.message.contains("not an APNs error response (first bytes 000012)"))
    }

    @Test func anUnansweredBarrierIsLeftAfterTheAnswerTimeoutPresumingWhatWasRead() {
        var harness = Harness(rows: 10, onUncertain: .report)
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 11))
        let start = harness.now
        // The gateway's TCP took the first 6 bytes (one whole batch of 4 rows), then nothing more.
        #expect(harness.machine.tick(acknowledged: 6, now: start) == .none)
        #expect(harness.machine.tick(acknowledged: 6, now: start + 9_000_000_000) == .none)
        #expect(harness.report.presumed == 4, "read more than the settle time ago")
        #expect(harness.machine.tick(acknowledged: 6, now: start + 10_000_000_000) == .abort)
        harness.now = start + 10_000_000_000
        #expect(harness.close(.local) == .finish)
        #expect(harness.report.presumed == 4)
        #expect(harness.report.uncertain == 6, "written, never acknowledged: per the policy")
        #expect(harness.report.unansweredBarriers == 1)
    }

    @Test func theAnswerTimeoutCountsFromTheGatewaysLastSignOfLife() {
        var harness = Harness(rows: 10)
        harness.open()
        harness.pump()
        let start = harness.now
        #expect(harness.machine.tick(acknowledged: 2, now: start) == .none)
        #expect(harness.machine.tick(acknowledged: 4, now: start + 8_000_000_000) == .none)
        #expect(harness.machine.tick(acknowledged: 4, now: start + 12_000_000_000) == .none, "it read 4 s ago")
        #expect(harness.machine.tick(acknowledged: 4, now: start + 18_000_000_000) == .abort)
    }

    @Test func aGatewayThatStopsReadingIsLeftAndTheRowsFollowThePolicy() {
        var harness = Harness(rows: 8, command: .simple)
        harness.open()
        harness.pump()
        #expect(harness.written.count == 8)
        #expect(harness.machine.tick(acknowledged: 0, now: harness.now) == .none)
        harness.now += 10_000_000_000
        #expect(harness.machine.tick(acknowledged: 0, now: harness.now) == .abort)
        guard case .reconnect = harness.close(.local) else {
            Issue.record("the rows are resent on a new connection")
            return
        }
        #expect(harness.report.uncertainEvents == 8)
        #expect(harness.report.unansweredBarriers == 0, "command 0 writes no barrier")
        #expect(harness.machine.failures == 1)
    }

    @Test func failedConnectsGiveUpOnlyAfterABoundInTimeWithoutProgress() {
        var harness = Harness(
            rows: 4,
            reconnect: ReconnectPolicy(
                initialDelay: .microseconds(1),
                maximumDelay: .microseconds(10),
                minimumInterval: .zero,
                maximumAttempts: 3,
                giveUpAfter: .seconds(60)
            )
        )
        let start = harness.now
        #expect(harness.machine.start(now: start) == .connect)
        for attempt in 1...5 {
            guard case .reconnect = harness.machine.connectFailed(.unreachable("reset"), now: start) else {
                Issue.record("attempt \(attempt) is retried: the bound in time has not passed")
                return
            }
            #expect(harness.machine.reconnectDue(now: start) == .connect)
        }
        // Another shard settled rows: the gateway is alive, only pacing connects.
        harness.machine.noteProgress(at: start + 30_000_000_000)
        guard case .reconnect = harness.machine.connectFailed(.unreachable("reset"), now: start + 61_000_000_000) else {
            Issue.record("progress 31 s ago keeps the job going")
            return
        }
        #expect(harness.machine.reconnectDue(now: start + 91_000_000_000) == .connect)
        guard case .fail(let error) = harness.machine.connectFailed(.unreachable("reset"), now: start + 91_000_000_000)
        else {
            Issue.record("60 s with no progress and failures in a row end the job")
            return
        }
        #expect(error.code == .unreachable)
        #expect(error.message.contains("no row settled for 61 s"), "\(error.message)")
    }

    @Test func connectFailuresThatCannotHealStopAtOnce() {
        var harness = Harness(rows: 4)
        #expect(harness.machine.start(now: harness.now) == .connect)
        guard
            case .fail(let error) = harness.machine.connectFailed(.hopeless("cannot resolve host x"), now: harness.now)
        else {
            Issue.record("a name that does not resolve is not retried")
            return
        }
        #expect(error.code == .unreachable)
        #expect(error.message.contains("cannot resolve host x"))
        #expect(harness.report.reconnects == 0)
    }

    @Test func refusedCredentialsEndTheJobAtOnce() {
        var harness = Harness(rows: 4)
        #expect(harness.machine.start(now: harness.now) == .connect)
        guard case .fail(let error) = harness.machine.connectFailed(.credentials("unknown CA"), now: harness.now) else {
            Issue.record("a refused certificate fails the job")
            return
        }
        #expect(error.code == .credentials)
    }

    @Test func unreachableGatewaysAreRetriedWithBackoffThenGivenUp() {
        var harness = Harness(rows: 4)
        #expect(harness.machine.start(now: harness.now) == .connect)
        for attempt in 1...3 {
            let action = harness.machine.connectFailed(.unreachable("connection refused"), now: harness.now)
            if attempt < 3 {
                guard case .reconnect(let delay) = action else {
                    Issue.record("attempt \(attempt) is retried")
                    return
                }
                #expect(delay <= 10_000)
                #expect(harness.machine.reconnectDue(now: harness.now) == .connect)
            } else {
                guard case .fail(let error) = action else {
                    Issue.record("the third failure gives up")
                    return
                }
                #expect(error.code == .unreachable)
            }
        }
        #expect(harness.report.reconnects == 2)
    }

    @Test func expiredRowsAreCountedNotSent() {
        var harness = Harness(rows: 3, expiry: 500)
        harness.open()
        #expect(harness.pump() == .finish)
        #expect(harness.written.isEmpty)
        #expect(harness.report.expired == 3)
    }

    @Test func aBatchTheConnectionCannotTakeYetIsFlushedByAge() {
        var harness = Harness(rows: 100, window: 2048, flushBytes: 1000, chunk: 2)
        harness.open()
        var encoded = 0
        #expect(harness.machine.write(queuedBytes: 0, now: harness.now, wallSeconds: 1_000) { _, _ in } == .needRows)
        harness.machine.rowsArrived(harness.rows[0..<2])
        #expect(
            harness.machine.write(queuedBytes: 0, now: harness.now, wallSeconds: 1_000) { _, _ in encoded += 1 }
                == .needRows
        )
        #expect(encoded == 2)
        // The connection's queue is full: nothing more is encoded, and the small batch waits for its age.
        let full = 1 << 30
        #expect(
            harness.machine.write(queuedBytes: full, now: harness.now, wallSeconds: 1_000) { _, _ in }
                == .scheduleFlush(afterNanoseconds: 1_000_000)
        )
        #expect(harness.machine.write(queuedBytes: full, now: harness.now, wallSeconds: 1_000) { _, _ in } == .none)
        harness.now += 1_000_000
        #expect(harness.machine.flushDue() == .write)
        #expect(harness.machine.write(queuedBytes: full, now: harness.now, wallSeconds: 1_000) { _, _ in } == .flush)
    }

    @Test func theBarriersAnswerUpgradesRowsPresumedEarlierOnItsConnection() {
        var harness = Harness(rows: 8)
        harness.open()
        #expect(harness.pump() == .writeBarrier(identifier: 9))
        let start = harness.now
        // The gateway read the first batch (4 rows); a settle time later they are presumed.
        #expect(harness.machine.tick(acknowledged: 4, now: start) == .none)
        #expect(harness.machine.tick(acknowledged: 4, now: start + 1_000_000_001) == .none)
        #expect(harness.report.presumed == 4)
        #expect(harness.answer(.missingDeviceToken, 9) == .close)
        #expect(harness.report.confirmed == 8, "the barrier's answer proves every row before it")
        #expect(harness.report.presumed == 0)
        #expect(harness.close(.local) == .finish)
    }

    @Test func anErrorForALaterRowUpgradesPresumedRowsButAnUnknownOneDoesNot() {
        var harness = Harness(rows: 8)
        harness.open()
        harness.pump()
        #expect(harness.machine.tick(acknowledged: 4, now: harness.now) == .none)
        #expect(harness.machine.tick(acknowledged: 4, now: harness.now + 1_000_000_001) == .none)
        #expect(harness.report.presumed == 4)
        // Row 6 failed: rows 1–4 (presumed) and 5 were accepted; 7 and 8 go again.
        #expect(harness.answer(.invalidToken, 6) == .close)
        #expect(harness.report.confirmed == 5)
        #expect(harness.report.presumed == 0)
        #expect(harness.report.rejectedTotal == 1)
        #expect(harness.report.resent == 2)

        var other = Harness(rows: 8)
        other.open()
        other.pump()
        #expect(other.machine.tick(acknowledged: 4, now: other.now) == .none)
        #expect(other.machine.tick(acknowledged: 4, now: other.now + 1_000_000_001) == .none)
        // Identifier 2 was presumed already: the answer proves nothing about the rows before it.
        #expect(other.answer(.invalidToken, 2) == .close)
        #expect(other.report.presumed == 4)
        #expect(other.report.confirmed == 0)
    }

    @Test func uncertainRowsLeftByThePolicyAreListedAsUnsettled() {
        var harness = Harness(rows: 10, flushBytes: 4, onUncertain: .report)
        harness.open()
        harness.pump()
        _ = harness.close(.remote("reset"), sentThrough: 6)
        let unsettled = harness.machine.outcomes.unsettledRows
        #expect(unsettled.map(\.line) == Array(2...9))
        #expect(unsettled.allSatisfy { $0.outcome == .uncertain && $0.file == "tokens.csv" })
        #expect(unsettled.first?.token == token(0).hexString)
        #expect(unsettled.count == harness.report.uncertain)
    }

    @Test func aStopListsTheRowsInFlightAsUnansweredAndTheRestAsUnsent() {
        var harness = Harness(rows: 10, window: 4, flushBytes: 4, chunk: 3)
        harness.open()
        #expect(harness.pump() == .scheduleFlush(afterNanoseconds: 2_000_000_000), "a full window of 4 rows waits")
        // Rows 1–4 are on the wire; rows 5 and 6 wait in the shard's hands; 7–10 were never handed out.
        #expect(harness.machine.interrupt() == .write)
        harness.machine.stop()
        harness.machine.leaveUnsettled(resolve: Harness.resolve)
        let unsettled = harness.machine.outcomes.unsettledRows
        #expect(unsettled.filter { $0.outcome == .unsent }.map(\.line) == [6, 7])
        #expect(unsettled.filter { $0.outcome == .unanswered }.map(\.line) == [2, 3, 4, 5])
        #expect(harness.report.uncertain == 0, "unanswered rows are the report's notSent, not uncertain")
        harness.machine.leaveUnsettled(resolve: Harness.resolve)
        #expect(harness.machine.outcomes.unsettledRows.count == 6, "nothing is listed twice")
    }

    /// Plays a gateway that drops the connection, with no answer, whenever `poison` is written on it, and otherwise
    /// reads everything (command 0: rows are presumed a settle time later; commands 1 and 2: the barrier is
    /// answered). Returns the connections it took, or nil when the job did not end within `bound` of them.
    private static func runAgainstAGatewayThatDrops(_ harness: inout Harness, poison: Int, bound: Int = 60) -> Int? {
        harness.open()
        var connections = 1
        var action = harness.pump()
        for _ in 0..<(bound * 8) {
            if action == .finish { return connections }
            if harness.written.contains(where: { $0.line == poison }) {
                guard case .reconnect = harness.close(.remote("reset by peer")) else {
                    Issue.record("the machine reconnects after a drop")
                    return nil
                }
                connections += 1
                guard connections <= bound else { return nil }
                harness.open()
                action = harness.pump()
                continue
            }
            switch action {
            case .writeBarrier(let identifier):
                #expect(harness.answer(.missingDeviceToken, identifier) == .close)
                let after = harness.close(.local)
                if after == .finish { return connections }
                connections += 1
                harness.open()
                action = harness.pump()
            case .scheduleFlush(let delay):
                harness.now += delay
                action = harness.machine.flushDue()
                if action == .write { action = harness.pump() }
            default:
                // Command 0: the gateway read everything; a settle time later it is presumed.
                _ = harness.machine.tick(acknowledged: harness.offset, now: harness.now)
                harness.now += 1_000_000_001
                action = harness.machine.tick(acknowledged: harness.offset, now: harness.now)
                if action == .write { action = harness.pump() }
            }
        }
        return nil
    }

    /// Command 0 has no error response: a row the gateway cannot take just ends the connection. Rows a connection
    /// left that drop the next one too are bisected, alone on their connection, until the row is found; sent alone
    /// twice more, it is left uncertain ("connection dropped") and never sent again. Every other row is delivered.
    @Test(arguments: [FrameCommand.simple, .framed])
    func aRowThatDropsEveryConnectionIsIsolatedAndLeftUncertain(command: FrameCommand) {
        var harness = Harness(rows: 64, window: 1024, flushBytes: 16, command: command, chunk: 64)
        let poison = 2 + 41
        guard let connections = Self.runAgainstAGatewayThatDrops(&harness, poison: poison) else {
            Issue.record("the job ends, the poison row isolated")
            return
        }
        #expect(harness.report.droppedConnection == 1)
        #expect(harness.report.uncertain == 1)
        #expect(harness.report.delivered == 63, "every other row is delivered")
        let unsettled = harness.machine.outcomes.unsettledRows
        #expect(unsettled.map(\.line) == [poison])
        #expect(unsettled.first?.outcome == .connectionDropped)
        #expect(unsettled.first?.outcome.rawValue == "uncertain: connection dropped")
        // Two drops start the isolation; bisection of 64 suspects takes at most 6 drops; then 2 drops alone.
        let drops = harness.allLines.filter { $0 == poison }.count
        #expect(drops <= 2 + 6 + 2, "bounded: \(drops) tries of the poison row")
        #expect(connections <= 2 + 12 + 2 + 2, "bounded: \(connections) connections")
        #expect(harness.machine.isDone)
    }

    /// A poison row at the front of many suspects: every probe drops, one connection per halving. Those drops are
    /// what the bisection asks for, so the backoff stays at its first step (no 30 s waits), and the job does not
    /// give up while the time bound has not passed.
    @Test func bisectionDropsDoNotLengthenTheBackoff() {
        var harness = Harness(
            rows: 512,
            window: 1024,
            flushBytes: 64,
            command: .framed,
            reconnect: ReconnectPolicy(
                initialDelay: .milliseconds(100),
                maximumDelay: .seconds(30),
                minimumInterval: .zero,
                maximumAttempts: 4,
                giveUpAfter: .seconds(60)
            ),
            chunk: 512
        )
        let poison = 2
        guard Self.runAgainstAGatewayThatDrops(&harness, poison: poison, bound: 40) != nil else {
            Issue.record("the job ends, the poison row isolated")
            return
        }
        #expect(harness.machine.outcomes.unsettledRows.map(\.line) == [poison])
        #expect(harness.report.delivered == 511)
        // Two drops start the isolation (backoff 100 ms, then 200 ms); the 9 halvings of 512 and the 2 solo drops
        // stay at 200 ms.
        #expect(harness.delays.allSatisfy { $0 <= 200_000_000 }, "\(harness.delays.map { $0 / 1_000_000 })")
    }

    /// A drop before the gateway's TCP acknowledged the probe says nothing of it: the same probe goes out again,
    /// nothing is narrowed and no row is condemned.
    @Test func aProbeTheGatewayNeverReceivedIsProbedAgain() {
        let patient = ReconnectPolicy(
            initialDelay: .microseconds(1),
            maximumDelay: .microseconds(10),
            minimumInterval: .zero,
            maximumAttempts: 3,
            giveUpAfter: .seconds(60)
        )
        var harness = Harness(rows: 16, flushBytes: 4, reconnect: patient, chunk: 16)
        for _ in 0..<2 {
            harness.open()
            harness.pump()
            _ = harness.close(.remote("reset by peer"))
        }
        harness.open()
        harness.pump()
        let probe = harness.written.map(\.line)
        #expect(probe.count == 8)
        // Reset with nothing acknowledged: no verdict.
        _ = harness.close(.remote("reset by peer"), acknowledged: 0)
        #expect(harness.machine.isolation?.suspects.count == 16)
        harness.open()
        harness.pump()
        #expect(harness.written.map(\.line) == probe, "the same probe again")
        // Half of it acknowledged (batches of 4): the culprit is among those 4; the other 4 go back to the queue.
        _ = harness.close(.remote("reset by peer"), acknowledged: 4)
        #expect(harness.machine.isolation?.suspects.count == 4)
        #expect((harness.report.droppedConnection ?? 0) == 0)
    }

    /// A probe is written in batches of the flush size, and waits while the connection's queue is over its limit.
    @Test func aProbeIsWrittenInBatchesWithinTheQueueLimit() {
        var harness = Harness(rows: 64, flushBytes: 4, chunk: 64)
        for _ in 0..<2 {
            harness.open()
            harness.pump()
            _ = harness.close(.remote("reset by peer"))
        }
        harness.open()
        harness.queuedBytes = 1 << 30
        #expect(harness.pump() == .none)
        #expect(harness.written.isEmpty, "nothing while the queue is full")
        harness.queuedBytes = 0
        let flushes = harness.flushes
        harness.pump()
        #expect(harness.written.count == 32)
        #expect(harness.flushes - flushes >= 8, "32 rows in batches of 4")
    }

    /// A connection that ends before the rows it inherited reach the gateway keeps them suspect: the next drop
    /// that carries them isolates them.
    @Test func aConnectionThatCarriedNothingKeepsTheRowsSuspect() {
        var harness = Harness(rows: 8, flushBytes: 4, command: .simple, chunk: 8)
        harness.open()
        harness.pump()
        _ = harness.close(.remote("reset by peer"))
        // The gateway closes the next connection before anything was handed to the kernel.
        harness.open()
        _ = harness.close(.remote("closed on connect"), sentThrough: 0)
        #expect(harness.machine.isolation == nil)
        harness.open()
        harness.pump()
        _ = harness.close(.remote("reset by peer"))
        #expect(harness.machine.isolation?.suspects.count == 8, "the rows dropped twice are isolated")
    }

    /// A drop that does not happen again (a reset) isolates nothing: the rows go out again and settle.
    @Test func aSingleDropIsolatesNothing() {
        var harness = Harness(rows: 32, flushBytes: 8, command: .simple, chunk: 32)
        harness.open()
        harness.pump()
        guard case .reconnect = harness.close(.remote("reset by peer")) else {
            Issue.record("the machine reconnects")
            return
        }
        harness.open()
        harness.pump()
        #expect(harness.machine.isolation == nil)
        #expect(harness.written.count == 32, "every uncertain row is sent again, together")
    }

    /// An error response while rows are isolated shows the gateway answers: the isolation ends and the suspects go
    /// back to the queue.
    @Test func anAnswerEndsTheIsolation() {
        var harness = Harness(rows: 16, flushBytes: 4, chunk: 16)
        for _ in 0..<2 {
            harness.open()
            harness.pump()
            _ = harness.close(.remote("reset by peer"))
        }
        harness.open()
        harness.pump()
        #expect(harness.machine.isolation?.suspects.count == 8, "the probe is the first half of 16 suspects")
        #expect(harness.written.count == 8)
        #expect(harness.answer(.invalidToken, 3) == .close)
        #expect(harness.machine.isolation == nil)
        _ = harness.close(.local)
        harness.open()
        harness.pump()
        #expect(harness.written.count == 13, "the 5 rows after the refused one and the 8 other suspects")
        #expect(harness.report.rejected == ["InvalidToken": 1])
    }
}
