import APNSWire
import NIOCore
import NIOHTTP2
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Drives `HTTP2ConnectionMachine` with seeded random events, legal and illegal, for some thousands of steps, as a
/// connection's driver would and as a hostile server might: SETTINGS of any limit, batches of requests, answers of
/// every kind for streams in flight and for streams long gone, resets, GOAWAY with any last stream, PING answers,
/// token renewals, failures, closes, time passing. One job queue feeds connection after connection. After every
/// step it checks what must always hold: every row is in exactly one place (the queue, a stream in flight, or
/// settled once); a closed connection takes no rows; every action fits the state it leaves; an event the state
/// rules out is a named failure that changes nothing.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2ConnectionMachineFuzzTests {
    @Test(arguments: [1, 2, 3, 0x5A17] as [UInt64])
    func randomEventsKeepEveryRowInOnePlace(seed: UInt64) {
        var fuzz = HTTP2Fuzz(seed: seed)
        for _ in 0..<4_000 { fuzz.step() }
        fuzz.endConnection()
        fuzz.checkInvariants()
        #expect(fuzz.connections > 5, "the run went through many connections")
        #expect(fuzz.impossibleEvents > 20, "illegal events were tried")
        #expect(fuzz.settledLines.count > 50, "rows were settled")
    }

    @Test func theInvariantsCatchARowLostOrHeldTwice() {
        var fuzz = HTTP2Fuzz(seed: 5)
        fuzz.checkInvariants()
        let item = fuzz.queue.removeLast()
        withKnownIssue("a row gone from the job") { fuzz.checkInvariants() }
        fuzz.queue.append(item)
        fuzz.queue.append(fuzz.queue[0])
        withKnownIssue("a row queued twice") { fuzz.checkInvariants() }
    }

    @Test func aWakeUpThatWasNotScheduledIsNamedAndChangesNothing() {
        var random = SplitMix64(seed: 9)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var machine = HTTP2Fuzz.newMachine(random: &random, now: start)
        _ = machine.settingsReceived(maximumConcurrentStreams: 10, now: start)
        #expect(machine.wokeUp() == HTTP2ConnectionMachine.Actions(.impossible(.wakeUpNotScheduled)))
        #expect(machine.noRowsReady(now: start, nextDelayed: nil) != nil)
        #expect(machine.wokeUp() == HTTP2ConnectionMachine.Actions(.writeRequests))
        #expect(machine.wokeUp().impossible == .wakeUpNotScheduled, "one wake-up per schedule")
    }
}

struct HTTP2Fuzz {
    typealias Machine = HTTP2ConnectionMachine

    static let rowCount = 600
    static let retry = HTTP2RetryPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(5),
        maximumAttempts: 3,
        maximumRetryAfter: .seconds(60)
    )

    var random: SplitMix64
    var machine: Machine
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    /// The job's queue: rows not on any connection.
    var queue: [HTTP2WorkItem]
    /// Lines settled for good, each once.
    var settledLines: Set<Int> = []
    /// Stream ids this connection wrote (some may have ended since).
    var written: [Int32] = []
    var wakeUpScheduled = false
    var sawReady = false
    var sawClose = false
    var pendingRenewals: [Machine.TokenRenewal] = []
    let bearer = ProviderToken.Bearer(authorization: "bearer fuzz", issuedAt: 1_000)

    var connections = 0
    var impossibleEvents = 0

    init(seed: UInt64) {
        self.random = SplitMix64(seed: seed)
        self.queue = (1...Self.rowCount).map { line in
            let token = try! DeviceToken(bytes: [UInt8](repeating: UInt8(truncatingIfNeeded: line), count: 32))
            return HTTP2WorkItem(row: TokenRow(token: token, line: line))
        }
        self.machine = Self.newMachine(random: &self.random, now: self.now)
    }

    static func newMachine(random: inout SplitMix64, now: NIODeadline) -> Machine {
        // Now and then a connection near the end of its stream ids.
        let firstStreamID: Int32 = random.next() % 8 == 0 ? Int32.max - 40 : 1
        return Machine(
            configuration: Machine.Configuration(
                maximumStreams: 1 + Int(random.next() % 50),
                requestTimeout: .seconds(10),
                pingInterval: .seconds(60),
                pingTimeout: .seconds(5),
                retry: Self.retry,
                recordDeliveries: true,
                batchLimit: 1 + Int(random.next() % 20),
                settingsTimeout: .seconds(20),
                largestBody: 100
            ),
            outcomes: RowOutcomes(onUncertain: random.next() % 3 == 0 ? .report : .resend, files: ["tokens.csv"]),
            firstStreamID: firstStreamID,
            random: SplitMix64(seed: random.next()),
            now: now
        )
    }

    var isClosed: Bool { self.machine.state == .closed }

    mutating func pick<T>(_ values: [T]) -> T { values[Int(self.random.next() % UInt64(values.count))] }

    /// A stream this connection wrote, in flight or not.
    mutating func someStream() -> Int32 {
        guard !self.written.isEmpty, self.random.next() % 6 != 0 else { return Int32(self.random.next() % 100) * 2 + 1 }
        return self.pick(self.written)
    }

    // MARK: Steps

    mutating func step() {
        self.now = self.now + .milliseconds(Int64(self.random.next() % 400))
        switch self.random.next() % 20 {
        case 0:
            let limit: Int? = self.random.next() % 4 == 0 ? nil : Int(self.random.next() % 30)
            let window: Int? = self.random.next() % 10 == 0 ? Int(self.random.next() % 200) : nil
            self.carryOut(
                self.machine.settingsReceived(maximumConcurrentStreams: limit, initialWindowSize: window, now: self.now)
            )
        case 1, 2, 3, 4:
            self.write()
        case 5, 6, 7, 8:
            self.answer(self.someStream())
        case 9:
            let code: HTTP2ErrorCode = self.pick([.refusedStream, .cancel, .protocolError])
            self.carryOut(self.machine.streamClosed(streamID: self.someStream(), code: code, now: self.now))
        case 10:
            guard self.random.next() % 4 == 0 else { return }
            let reason: APNSReason? = self.pick([nil, nil, .shutdown, .badCertificate])
            self.carryOut(self.machine.goAwayReceived(lastStreamID: self.someStream(), reason: reason, now: self.now))
        case 11:
            self.carryOut(self.machine.pingAcknowledged(now: self.now))
        case 12:
            self.now = self.now + .seconds(Int64(self.random.next() % 12))
            self.carryOut(self.machine.tick(now: self.now))
        case 13:
            if self.wakeUpScheduled {
                self.wakeUpScheduled = false
                self.carryOut(self.machine.wokeUp())
            } else {
                self.impossibleWakeUp()
            }
        case 14:
            guard let deadline = self.machine.noRowsReady(now: self.now, nextDelayed: nil) else { return }
            #expect(!self.isClosed, "a closed connection asks for no wake-up")
            #expect(deadline > self.now)
            self.wakeUpScheduled = true
        case 15:
            guard !self.pendingRenewals.isEmpty else { return self.impossibleWakeUp() }
            let renewal = self.pendingRenewals.removeFirst()
            let result: ProviderToken.Renewal = self.random.next() % 3 == 0 ? .refused("the clocks disagree") : .renewed
            self.carryOut(self.machine.tokenRenewed(renewal, result: result, now: self.now))
        case 16:
            if self.random.next() % 10 == 0 { self.carryOut(self.machine.failed("reset by peer", now: self.now)) }
        case 17:
            if self.queue.isEmpty, self.random.next() % 2 == 0 { self.carryOut(self.machine.noRowsLeft(now: self.now)) }
        case 18:
            // The channel went away: the connection is over, and a new one takes its place.
            if self.sawClose || self.random.next() % 15 == 0 { self.endConnection() }
        default:
            self.carryOut(self.machine.readComplete())
        }
        self.checkInvariants()
    }

    /// Takes rows from the queue for the room the machine gives, as the driver does.
    mutating func write() {
        let room = self.machine.roomToWrite(isWritable: self.random.next() % 8 != 0)
        if self.isClosed { #expect(room == 0, "a closed connection takes no rows") }
        guard room > 0, !self.queue.isEmpty else { return }
        let count = min(room, self.queue.count, 1 + Int(self.random.next() % UInt64(room)))
        let items = Array(self.queue.prefix(count))
        self.queue.removeFirst(count)
        let bearer = self.random.next() % 2 == 0 ? self.bearer : nil
        let (first, actions) = self.machine.writing(items, bearer: bearer, now: self.now)
        for index in 0..<count { self.written.append(first + Int32(2 * index)) }
        self.carryOut(actions)
    }

    mutating func answer(_ streamID: Int32) {
        let answers: [(Int, APNSReason?)] = [
            (200, nil), (200, nil), (200, nil), (400, .badDeviceToken), (410, .unregistered), (429, .tooManyRequests),
            (500, .internalServerError), (503, .serviceUnavailable), (403, .expiredProviderToken),
            (403, .invalidProviderToken), (100, nil),
        ]
        let (status, reason) = self.pick(answers)
        let body = reason.map { APNSErrorBody(reason: $0, timestamp: status == 410 ? 1_000 : nil).jsonBytes } ?? []
        let retryAfter: Int64? = status == 429 && self.random.next() % 2 == 0 ? 1 : nil
        let endStream = body.isEmpty && status >= 200
        self.carryOut(
            self.machine.headersReceived(
                streamID: streamID,
                status: status,
                apnsID: status == 200 ? "id-\(streamID)" : nil,
                retryAfter: retryAfter,
                endStream: endStream,
                now: self.now
            )
        )
        guard !body.isEmpty else { return }
        let data = self.machine.dataReceived(
            streamID: streamID,
            bytes: ByteBuffer(bytes: body),
            endStream: true,
            now: self.now
        )
        self.carryOut(data)
    }

    /// `wokeUp` with no wake-up scheduled: named, and nothing changes.
    mutating func impossibleWakeUp() {
        guard !self.wakeUpScheduled else { return }
        let room = self.machine.roomToWrite(isWritable: true)
        let streams = self.machine.openStreams
        let state = self.machine.state
        #expect(self.machine.wokeUp() == Machine.Actions(.impossible(.wakeUpNotScheduled)))
        self.impossibleEvents += 1
        #expect(self.machine.roomToWrite(isWritable: true) == room)
        #expect(self.machine.openStreams == streams)
        #expect(self.machine.state == state)
    }

    /// The connection is gone: whatever it held settles or goes back, and a new connection starts.
    mutating func endConnection() {
        self.carryOut(self.machine.closed(now: self.now))
        #expect(self.machine.openStreams == 0)
        #expect(self.machine.roomToWrite(isWritable: true) == 0)
        self.takeResults()
        // A renewal the closed connection still waits for is answered; the row settles or goes back.
        for renewal in self.pendingRenewals {
            self.carryOut(self.machine.tokenRenewed(renewal, result: .renewed, now: self.now))
        }
        self.pendingRenewals = []
        self.takeResults()
        self.connections += 1
        self.machine = Self.newMachine(random: &self.random, now: self.now)
        self.written = []
        self.wakeUpScheduled = false
        self.sawReady = false
        self.sawClose = false
    }

    // MARK: Actions and invariants

    /// Checks each action against the state the machine is in now and carries it out as the driver would.
    mutating func carryOut(_ actions: Machine.Actions) {
        var lastRank = -1
        for action in actions {
            #expect(action.rank > lastRank, "one action of a kind, in the driver's order")
            lastRank = action.rank
            switch action {
            case .resetStreams(let ids):
                for id in ids { #expect(!self.machine.isInFlight(streamID: id), "a reset stream is settled") }
            case .sendPing:
                #expect(!self.isClosed)
            case .ready:
                #expect(!self.sawReady, "ready once per connection")
                self.sawReady = true
            case .close:
                #expect(self.isClosed, "close leaves the machine closed")
                #expect(!self.sawClose, "close once per connection")
                self.sawClose = true
            case .renewToken(let renewal):
                self.pendingRenewals.append(renewal)
            case .impossible(let event):
                Issue.record("a legal event was refused as impossible: \(event)")
            case .giveBack:
                self.takeResults()
            case .note, .stopJob, .retire, .writeRequests:
                break
            }
        }
    }

    mutating func takeResults() {
        guard let results = self.machine.takeResults() else { return }
        let outcomes = results.outcomes
        let lines =
            results.deliveries.map(\.line) + outcomes.rejectedRows.map(\.line) + outcomes.unsettledRows.map(\.line)
        #expect(lines.count == results.finals, "each settled row is listed once")
        for line in lines {
            #expect(!self.settledLines.contains(line), "row \(line) settled twice")
            self.settledLines.insert(line)
        }
        for item in results.retries {
            #expect(!self.settledLines.contains(item.row.line), "a settled row is not sent again")
        }
        self.queue.append(contentsOf: results.retries)
    }

    mutating func checkInvariants() {
        // Rows a renewal waits for are the machine's, like those of streams in flight.
        self.takeResults()
        let held = self.machine.openStreams + self.pendingRenewals.count
        #expect(self.queue.count + held + self.settledLines.count == Self.rowCount, "every row is in one place")
        let queued = self.queue.map(\.row.line)
        #expect(Set(queued).count == queued.count, "no row is queued twice")
        #expect(self.settledLines.isDisjoint(with: queued), "no settled row is queued")
        if self.isClosed {
            #expect(self.machine.roomToWrite(isWritable: true) == 0, "no write after close")
            #expect(self.machine.openStreams == 0)
        }
    }
}

/// Failures name where the run was, not the whole state.
extension HTTP2Fuzz: CustomTestStringConvertible {
    var testDescription: String {
        "connection \(self.connections), \(self.queue.count) rows queued, \(self.settledLines.count) settled"
    }
}
