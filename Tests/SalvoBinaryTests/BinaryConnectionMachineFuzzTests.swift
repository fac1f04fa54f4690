import APNSWire
import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

/// Drives `BinaryConnectionMachine` with seeded random events, legal and illegal, for some thousands of steps,
/// as `Shard` would and as a careless driver might: connects that succeed or fail, batches, error responses for
/// any identifier, drops, ticks with any acknowledgement, timers, interruptions, events in states that rule
/// them out. After every step it checks what must always hold: every row handed to the machine is in exactly one
/// place (waiting, in the sent window, isolated, or settled); nothing is encoded while no connection is open;
/// every action fits the state it leaves; an event the state rules out is a named failure that changes nothing.
@Suite(.tags(.pure), .runs(.pure)) struct BinaryConnectionMachineFuzzTests {
    @Test(arguments: [1, 2, 3, 0x5A17] as [UInt64])
    func randomEventsKeepEveryRowInOnePlace(seed: UInt64) {
        var fuzz = BinaryFuzz(seed: seed)
        for _ in 0..<4_000 { fuzz.step() }
        fuzz.finishMachine()
        #expect(fuzz.machinesEnded > 3, "the run saw machines through to their end")
        #expect(fuzz.impossibleEvents > 50, "illegal events were tried")
        #expect(fuzz.rowsSettled > 200, "rows were settled")
    }

    @Test func theInvariantsCatchARowLostOrHeldTwice() {
        var fuzz = BinaryFuzz(seed: 5)
        fuzz.machine.rowsArrived(fuzz.rows[0..<3])
        fuzz.handedOut = 3
        fuzz.checkInvariants()
        let row = fuzz.machine.pending.removeFirst()
        withKnownIssue("a row gone from the machine") { fuzz.checkInvariants() }
        fuzz.machine.pending.append(row)
        fuzz.machine.pending.append(row)
        fuzz.handedOut = 4
        withKnownIssue("a row waiting twice") { fuzz.checkInvariants() }
    }

    @Test func eventsTheStateRulesOutAreNamedAndChangeNothing() {
        var random = SplitMix64(seed: 9)
        var machine = BinaryFuzz.newMachine(random: &random)
        #expect(machine.opened() == .impossible(.openedWithoutConnect))
        #expect(machine.connectFailed(.unreachable("x"), now: 1) == .impossible(.connectFailedWithoutConnect))
        #expect(
            machine.closed(.local, sentThrough: 0, now: 1, resolve: BinaryFuzz.resolve)
                == .impossible(.closedWithoutConnection)
        )
        machine.rowsArrived([TokenRow(token: token(1), line: 2)])
        #expect(machine.start(now: 1) == .connect)
        #expect(machine.start(now: 1) == .impossible(.startWhileRunning))
        #expect(machine.reconnectDue(now: 1) == .impossible(.reconnectWhileConnected))
        #expect(
            machine.closed(.local, sentThrough: 0, now: 1, resolve: BinaryFuzz.resolve)
                == .impossible(.closedWithoutConnection)
        )
        #expect(machine.opened() == .write)
        #expect(machine.opened() == .impossible(.openedWithoutConnect))
        #expect(machine.reconnectDue(now: 1) == .impossible(.reconnectWhileConnected))
        #expect(machine.pending.count == 1, "nothing changed")
        // After the machine stopped, late completions are no mistake: they are ignored.
        machine.stop()
        #expect(machine.opened() == .none)
        #expect(machine.connectFailed(.unreachable("x"), now: 1) == .none)
        #expect(machine.reconnectDue(now: 1) == .none)
    }
}

struct BinaryFuzz {
    typealias Machine = BinaryConnectionMachine

    var random: SplitMix64
    var machine: Machine
    var rows: [TokenRow] = []
    var handedOut = 0
    var now: UInt64 = 10_000_000_000
    /// The driver's view: a connect asked for, a connection open (and asked to close), timers pending.
    var connectAsked = false
    var connected = false
    var closing = false
    var reconnectPending = false
    var flushPending = false
    var barrierInWindow = false
    /// Ciphertext of the current connection (1 byte per frame) and bytes encoded and not yet flushed.
    var offset = 0
    var unflushed = 0
    var lastIdentifier: UInt32 = 0

    var machinesEnded = 0
    var impossibleEvents = 0
    var rowsSettled = 0

    init(seed: UInt64) {
        self.random = SplitMix64(seed: seed)
        self.machine = Self.newMachine(random: &self.random)
        self.newRows()
        self.expect(self.machine.start(now: self.now), legal: true)
    }

    static func newMachine(random: inout SplitMix64) -> Machine {
        let command: FrameCommand = random.next() % 4 == 0 ? .simple : .framed
        let onUncertain: OnUncertain = random.next() % 3 == 0 ? .report : .resend
        return Machine(
            configuration: .init(
                gateway: "gateway:2195",
                command: command,
                frameByteCount: 1,
                expiry: 0,
                flush: FlushPolicy(bytes: 4, delay: .milliseconds(1)),
                reconnect: ReconnectPolicy(
                    initialDelay: .microseconds(1),
                    maximumDelay: .microseconds(10),
                    minimumInterval: .zero,
                    maximumAttempts: 6
                ),
                settleNanoseconds: 1_000_000_000,
                peerReceiveBufferBytes: 0,
                windowCapacity: 16 + Int(random.next() % 48),
                processingErrorRetries: 2,
                onUncertain: onUncertain,
                queueLimitBytes: 1 << 30
            ),
            files: ["tokens.csv"],
            seed: random.next()
        )
    }

    mutating func newRows() {
        let count = 20 + Int(self.random.next() % 80)
        self.rows = (0..<count).map { index in
            TokenRow(
                token: token(UInt8(truncatingIfNeeded: index)),
                line: index + 2,
                reference: RowReference(file: 0, offset: index)
            )
        }
        self.handedOut = 0
    }

    static func resolve(_ journaled: SentWindow.Journaled) -> DeviceToken {
        token(UInt8(truncatingIfNeeded: journaled.reference.offset))
    }

    var state: Machine.State { self.machine.state }

    var isOpen: Bool {
        if case .open = self.state { return true }
        return false
    }

    var isTerminal: Bool {
        switch self.state {
        case .finished, .failed: true
        default: false
        }
    }

    // MARK: Steps

    mutating func step() {
        self.now += self.random.next() % 300_000_000
        switch self.random.next() % 16 {
        case 0, 1, 2:
            self.pump()
        case 3:
            // The connect asked for completes, or fails.
            guard self.connectAsked else { return self.impossibleConnectResult() }
            self.connectAsked = false
            if self.random.next() % 4 == 0 {
                let action = self.machine.connectFailed(.unreachable("refused"), now: self.now)
                self.expect(action, legal: true)
            } else {
                self.openConnection()
            }
        case 4:
            self.answer()
        case 5:
            guard self.connected else { return }
            let action = self.machine.tick(acknowledged: self.randomUpTo(self.offset), now: self.now)
            self.expect(action, legal: true)
        case 6:
            // The connection drops, or ends after we asked it to close.
            guard self.connected else { return self.impossibleClose() }
            let cause: Machine.CloseCause =
                self.closing ? .local : self.random.next() % 2 == 0 ? .remote("reset") : .local
            self.connectionEnded(cause)
        case 7:
            guard self.reconnectPending else { return self.impossibleReconnect() }
            self.reconnectPending = false
            self.expect(self.machine.reconnectDue(now: self.now), legal: true)
        case 8:
            guard self.flushPending else { return }
            self.flushPending = false
            self.expect(self.machine.flushDue(), legal: true)
        case 9:
            if self.random.next() % 20 == 0 { self.expect(self.machine.interrupt(), legal: true) }
        case 10:
            if self.random.next() % 40 == 0, self.connected {
                self.expect(self.machine.receivedGarbage("HTTP/1.1"), legal: true)
            }
        case 11:
            self.impossibleConnectResult()
        case 12:
            self.impossibleClose()
        case 13:
            self.impossibleReconnect()
        case 14:
            // `start` again on a machine that left idle: only a fresh machine starts.
            if case .idle = self.state { return }
            let before = self.snapshot
            #expect(self.machine.start(now: self.now) == .impossible(.startWhileRunning))
            self.impossibleEvents += 1
            #expect(self.snapshot == before)
        default:
            self.now += self.random.next() % 3_000_000_000
        }
        if self.isTerminal { self.finishMachine() }
        self.checkInvariants()
    }

    mutating func randomUpTo(_ limit: Int) -> Int { limit <= 0 ? 0 : Int(self.random.next() % UInt64(limit + 1)) }

    mutating func openConnection() {
        let action = self.machine.opened()
        if self.isTerminal {
            #expect(action == .none)
            return
        }
        #expect(action == .write)
        #expect(self.isOpen)
        self.connected = true
        self.closing = false
        self.offset = 0
        self.unflushed = 0
        self.lastIdentifier = 0
        self.barrierInWindow = false
        self.expect(action, legal: true)
    }

    mutating func connectionEnded(_ cause: Machine.CloseCause) {
        let sent = self.randomUpTo(self.offset)
        let acknowledged = self.randomUpTo(sent)
        self.connected = false
        self.closing = false
        self.flushPending = false
        self.unflushed = 0
        self.barrierInWindow = false
        let action = self.machine.closed(
            cause,
            sentThrough: sent,
            acknowledged: acknowledged,
            now: self.now,
            resolve: Self.resolve
        )
        self.expect(action, legal: true)
    }

    mutating func answer() {
        guard self.connected, !self.closing else { return }
        let statuses: [ErrorStatus] = [.noErrors, .processingError, .invalidToken, .missingTopic, .shutdown]
        let status = statuses[Int(self.random.next() % UInt64(statuses.count))]
        // An identifier the connection used, or one it never did.
        let identifier =
            self.random.next() % 8 == 0
            ? UInt32(truncatingIfNeeded: self.random.next()) : UInt32(1 + self.randomUpTo(Int(self.lastIdentifier)))
        let wasOpen = self.isOpen
        let action = self.machine.received(
            ErrorResponse(status: status, identifier: identifier),
            now: self.now,
            resolve: Self.resolve
        )
        if wasOpen { self.barrierInWindow = false }
        self.expect(action, legal: true)
    }

    /// Writes until the machine waits, as `Shard.pump` does; nothing may be encoded without an open connection.
    mutating func pump() {
        guard self.connected, !self.closing else { return }
        var action = Machine.Action.write
        while true {
            switch action {
            case .write:
                break
            case .needRows:
                if self.handedOut < self.rows.count {
                    let end = min(self.rows.count, self.handedOut + 3)
                    self.machine.rowsArrived(self.rows[self.handedOut..<end])
                    self.handedOut = end
                } else {
                    self.machine.sourceExhausted()
                }
            case .flush:
                #expect(self.unflushed > 0 || self.isOpen, "a flush asked for on an open connection")
                self.flush()
            case .writeBarrier(let identifier):
                #expect(self.isOpen)
                self.barrierInWindow = true
                self.lastIdentifier = max(self.lastIdentifier, identifier)
                self.unflushed += 1
                self.flush()
                return
            default:
                return self.expect(action, legal: true)
            }
            let connected = self.connected
            var encoded = 0
            var identifiers: [UInt32] = []
            action = self.machine.write(queuedBytes: 0, now: self.now, wallSeconds: 1_000) { _, identifier in
                encoded += 1
                identifiers.append(identifier)
            }
            #expect(encoded == 0 || connected, "no row is encoded without a connection")
            self.unflushed += encoded
            if let last = identifiers.last { self.lastIdentifier = max(self.lastIdentifier, last) }
        }
    }

    mutating func flush() {
        let start = self.offset
        self.offset += self.unflushed
        self.machine.flushed(bytes: self.unflushed, ciphertextStart: start, ciphertextEnd: self.offset, now: self.now)
        self.unflushed = 0
    }

    // MARK: Illegal events

    /// `opened` or `connectFailed` with no connect asked for: named, and nothing changes.
    mutating func impossibleConnectResult() {
        guard !self.connectAsked, !self.isTerminal else { return }
        let before = self.snapshot
        if self.random.next() % 2 == 0 {
            #expect(self.machine.opened() == .impossible(.openedWithoutConnect))
        } else {
            let action = self.machine.connectFailed(.unreachable("refused"), now: self.now)
            #expect(action == .impossible(.connectFailedWithoutConnect))
        }
        self.impossibleEvents += 1
        #expect(self.snapshot == before, "an impossible event changes nothing")
    }

    /// `closed` with no connection.
    mutating func impossibleClose() {
        guard !self.connected, !self.isTerminal else { return }
        let before = self.snapshot
        let action = self.machine.closed(.remote("reset"), sentThrough: 0, now: self.now, resolve: Self.resolve)
        #expect(action == .impossible(.closedWithoutConnection))
        self.impossibleEvents += 1
        #expect(self.snapshot == before, "an impossible event changes nothing")
    }

    /// `reconnectDue` while connecting or connected.
    mutating func impossibleReconnect() {
        switch self.state {
        case .connecting, .open, .answered: break
        default: return
        }
        let before = self.snapshot
        #expect(self.machine.reconnectDue(now: self.now) == .impossible(.reconnectWhileConnected))
        self.impossibleEvents += 1
        #expect(self.snapshot == before, "an impossible event changes nothing")
    }

    // MARK: Actions and invariants

    /// Carries out `action` as the driver would, after checking it fits the state the machine is in now.
    mutating func expect(_ action: Machine.Action, legal: Bool) {
        switch action {
        case .none:
            break
        case .connect:
            #expect(self.stateName == "connecting")
            #expect(!self.connected)
            self.connectAsked = true
        case .reconnect:
            #expect(self.stateName == "idle")
            #expect(!self.connected)
            self.reconnectPending = true
        case .needRows, .flush, .write, .writeBarrier:
            #expect(self.isOpen, "writing is asked only on an open connection")
            if self.connected { self.pump() }
        case .scheduleFlush:
            #expect(self.isOpen)
            self.flushPending = true
        case .close:
            #expect(self.stateName == "answered")
            #expect(self.connected)
            self.closing = true
        case .abort:
            #expect(self.isOpen)
            #expect(self.connected)
            self.closing = true
        case .finish:
            #expect(self.stateName == "finished")
            #expect(self.liveRows == 0, "a finished machine holds no row")
        case .fail:
            #expect(self.stateName == "failed")
        case .impossible(let event):
            Issue.record("a legal event was refused as impossible: \(event)")
        }
    }

    var stateName: String {
        switch self.state {
        case .idle: "idle"
        case .connecting: "connecting"
        case .open: "open"
        case .answered: "answered"
        case .finished: "finished"
        case .failed: "failed"
        }
    }

    /// Rows the machine holds: waiting, written and unsettled, isolated.
    var liveRows: Int {
        self.machine.pending.count + self.machine.window.count - (self.barrierInWindow ? 1 : 0)
            + (self.machine.isolation?.suspects.count ?? 0)
    }

    /// Rows settled for good, each counted once: delivered, rejected, expired, uncertain, or left unsettled.
    var settledRows: Int {
        let outcomes = self.machine.outcomes
        let leftOther = outcomes.unsettledRows.count { $0.outcome != .uncertain && $0.outcome != .connectionDropped }
        return outcomes.settled + leftOther
    }

    struct Snapshot: Equatable {
        var state: String
        var live: Int
        var settled: Int
        var report: JobReport
    }

    var snapshot: Snapshot {
        Snapshot(
            state: self.stateName,
            live: self.liveRows,
            settled: self.settledRows,
            report: self.machine.outcomes.report
        )
    }

    func checkInvariants() {
        #expect(self.liveRows + self.settledRows == self.handedOut, "every row handed out is in one place")
        let waiting = self.machine.pending.map(\.line) + (self.machine.isolation?.suspects.map(\.line) ?? [])
        #expect(Set(waiting).count == waiting.count, "no row waits twice")
        let listed = Set(
            self.machine.outcomes.unsettledRows.map(\.line) + self.machine.outcomes.rejectedRows.map(\.line)
        )
        #expect(listed.isDisjoint(with: waiting), "no settled row waits to be sent")
        #expect(!self.barrierInWindow || self.isOpen, "a barrier is in the window only while its connection is open")
    }

    /// Ends the machine (it finished or failed, or the run is over): what it holds is left unsettled, and every
    /// row handed to it must be settled exactly once. Then a new machine starts with new rows.
    mutating func finishMachine() {
        self.machine.stop()
        self.machine.leaveUnsettled(resolve: Self.resolve)
        self.barrierInWindow = false
        #expect(self.liveRows == 0)
        #expect(self.settledRows == self.handedOut, "every row handed out is settled once at the end")
        self.rowsSettled += self.settledRows
        self.machinesEnded += 1
        self.machine = Self.newMachine(random: &self.random)
        self.newRows()
        self.connectAsked = false
        self.connected = false
        self.closing = false
        self.reconnectPending = false
        self.flushPending = false
        self.expect(self.machine.start(now: self.now), legal: true)
    }
}

/// Failures name where the run was, not the whole state.
extension BinaryFuzz: CustomTestStringConvertible {
    var testDescription: String {
        "machine \(self.machinesEnded), state \(self.stateName), \(self.handedOut) rows handed out"
    }
}
