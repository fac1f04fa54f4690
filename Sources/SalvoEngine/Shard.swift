import APNSWire
import DequeModule
import Dispatch
import NIOCore
import SalvoIO

/// One gateway connection's share of a job: takes rows from the source, encodes them into one
/// preallocated buffer, writes in batches, journals what it wrote, and settles it from the gateway's
/// answers — rewinding to the failed row's successor and resending what the gateway discarded.
///
/// Confined to `queue`: every method and callback runs there (`dispatchPrecondition` at the entry points),
/// which is why it is `@unchecked Sendable`. Nothing is shared with other shards but the token source
/// (taken a chunk at a time) and the final report (merged by the job).
///
/// Hot path, per notification: take a row, journal it, copy the frame template and patch token and
/// identifier — no allocation, no lock, no system call. Per batch: one TLS write and one submission.
final class Shard: @unchecked Sendable {
    let index: Int
    let queue: DispatchQueue
    private let configuration: BinaryJobConfiguration
    private let context: IOContext
    private let source: TokenSource
    private let windowCapacity: Int

    /// Rows to write, oldest first; rows the gateway discarded go back to the front.
    private var pending: Deque<TokenRow> = []
    private var sourceExhausted = false
    /// Rows that ended in a processing error, by line, and how often.
    private var processingErrors: [Int: Int] = [:]

    private enum State {
        case idle
        case connecting
        case open(TLSConnection)
        /// The gateway answered an error; the connection is going away.
        case closing(TLSConnection)
        case finished
    }
    private var state = State.idle
    private var window: SentWindow
    private var outbound: ByteBuffer
    private var outboundSince: UInt64?
    private var inbound = ByteBuffer()
    private var barrierWritten = false
    /// Rows this shard lets be unsettled at once: the window's capacity while errors are rare, less after
    /// an error (everything written after a failed row is discarded and written again, so when errors come
    /// every few hundred rows, a large flight only multiplies the waste), growing back as rows settle.
    private var flightLimit: Int
    private static let minimumFlight = 256
    private var answered = false
    /// Whether anything written on the current connection was settled (confirmed or presumed).
    private var settledOnConnection = false

    private var failures = 0
    private var lastConnectAt: UInt64 = 0
    private var generator: SplitMix64
    private var timer: DispatchSourceTimer?
    private var flushScheduled = false

    private(set) var report = JobReport()
    private(set) var rejectedRows: [RejectedRow] = []
    private var completion: ((Result<Void, JobError>) -> Void)?

    init(
        index: Int,
        configuration: BinaryJobConfiguration,
        source: TokenSource,
        windowCapacity: Int
    ) throws {
        self.index = index
        self.queue = DispatchQueue(label: "salvo.shard.\(index)")
        self.configuration = configuration
        self.context = try IOContext(queue: self.queue, transport: configuration.transport)
        self.source = source
        self.windowCapacity = windowCapacity
        self.window = SentWindow(capacity: windowCapacity)
        self.flightLimit = windowCapacity
        // Room for a full batch plus one frame, so a batch never makes the buffer grow.
        self.outbound = ByteBufferAllocator().buffer(
            capacity: configuration.flush.bytes + 2 * configuration.template.frameByteCount
        )
        self.pending.reserveCapacity(configuration.chunkRows * 2)
        self.generator = SplitMix64(seed: UInt64(index) &+ 0x5A17_0000)
    }

    var transportKind: TransportKind { self.context.transport }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Starts the shard; `completion` runs on `queue` once every row it took is settled, or the job
    /// cannot go on.
    func start(completion: @escaping @Sendable (Result<Void, JobError>) -> Void) {
        self.queue.async {
            self.completion = completion
            let tick = DispatchSource.makeTimerSource(queue: self.queue)
            let period = max(self.configuration.settleNanoseconds / 8, 1_000_000)
            tick.schedule(deadline: .now() + .nanoseconds(Int(period)), repeating: .nanoseconds(Int(period)))
            tick.setEventHandler { [weak self] in self?.settleByAge() }
            tick.resume()
            self.timer = tick
            self.connect()
        }
    }

    /// Stops at once (another shard hit a fatal error): closes the connection, keeps the counts.
    func stop() {
        self.queue.async {
            self.fail(JobError("stopped"), notify: false)
        }
    }

    // MARK: - Connecting

    private func connect() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        guard case .idle = self.state else { return }
        if self.isDone {
            self.finish()
            return
        }
        self.state = .connecting
        self.lastConnectAt = Self.now()
        TLSConnection.connect(
            host: self.configuration.host,
            port: self.configuration.port,
            serverName: self.configuration.serverName,
            tls: self.configuration.tls,
            context: self.context,
            options: self.configuration.connectionOptions
        ) { result in
            switch result {
            case .success(let connection):
                self.opened(connection)
            case .failure(let error):
                self.connectFailed(error)
            }
        }
    }

    private func opened(_ connection: TLSConnection) {
        guard case .connecting = self.state else {
            connection.close()
            return
        }
        self.state = .open(connection)
        self.window.restart()
        self.inbound.clear()
        self.barrierWritten = false
        self.answered = false
        self.settledOnConnection = false
        connection.onPlaintext = { [weak self] bytes in self?.received(bytes) }
        connection.onWritable = { [weak self] in self?.pump() }
        connection.onClose = { [weak self] end in self?.closed(end) }
        self.pump()
    }

    /// Certificate problems stop the job: every connect would fail the same way.
    private static let fatalCodes: Set<SalvoIOError.Code> = [
        .unknownCA, .certificateExpired, .keyMismatch, .wrongPassphrase, .hostnameMismatch, .certificateRejected,
        .handshakeRefused, .unreadableCredential, .invalidConfiguration, .peerCertificateMissing,
    ]

    private func connectFailed(_ error: SalvoIOError) {
        self.state = .idle
        if Self.fatalCodes.contains(error.code) {
            self.fail(JobError("the TLS handshake with the gateway failed: \(error.message)"), notify: true)
            return
        }
        self.failures += 1
        if self.configuration.reconnect.givesUp(after: self.failures) {
            self.fail(
                JobError(
                    "cannot reach \(self.configuration.host):\(self.configuration.port) after \(self.failures) tries: \(error.message)"
                ),
                notify: true
            )
            return
        }
        self.scheduleReconnect()
    }

    private func scheduleReconnect() {
        let delay = self.configuration.reconnect.delay(
            failures: self.failures,
            sinceLastConnect: Self.now() &- self.lastConnectAt,
            random: self.generator.nextUnit()
        )
        self.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) { [weak self] in
            guard let self else { return }
            self.report.reconnects += 1
            self.connect()
        }
    }

    // MARK: - Writing

    private var isDone: Bool {
        self.sourceExhausted && self.pending.isEmpty && self.window.isEmpty && self.outbound.readableBytes == 0
    }

    /// The next row to write, refilling from the source a chunk at a time.
    private func nextRow() -> TokenRow? {
        if let row = self.pending.popFirst() { return row }
        guard !self.sourceExhausted else { return nil }
        do {
            if let chunk = try self.source.nextChunk(maximumRows: self.configuration.chunkRows) {
                self.pending.append(contentsOf: chunk)
                return self.pending.popFirst()
            }
        } catch {
            self.fail(JobError("\(error)"), notify: true)
            return nil
        }
        self.sourceExhausted = true
        return nil
    }

    /// Encodes and writes while the window and the connection take more.
    private func pump() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        guard case .open(let connection) = self.state else { return }
        let template = self.configuration.template
        let flushBytes = self.configuration.flush.bytes
        let queueLimit = 4 * flushBytes
        let expired = template.expiry != 0 && UInt64(wallClockSeconds()) > UInt64(template.expiry)

        let limit = min(self.flightLimit, self.windowCapacity)
        while !self.barrierWritten && self.window.count < limit && connection.queuedBytes < queueLimit {
            guard let row = self.nextRow() else { break }
            if expired {
                self.report.expired += 1
                continue
            }
            let identifier = self.window.record(row)
            template.write(token: row.token, identifier: identifier, to: &self.outbound)
            if self.outboundSince == nil { self.outboundSince = Self.now() }
            if self.outbound.readableBytes >= flushBytes {
                guard self.flush(connection) else { return }
            }
        }

        if self.barrierWritten { return }
        let drained = self.sourceExhausted && self.pending.isEmpty
        if !drained && self.window.count >= limit && template.command != .simple {
            // The flight is full: a barrier now settles it all at the cost of one reconnect, rather than
            // waiting for rows to be presumed (which a slow gateway, or a small flight, may never allow).
            if self.outbound.readableBytes > 0 {
                guard self.flush(connection) else { return }
            }
            self.writeBarrier(connection)
            return
        }
        if drained {
            if self.outbound.readableBytes > 0 {
                guard self.flush(connection) else { return }
            }
            if !self.window.isEmpty && !self.barrierWritten && template.command != .simple {
                self.writeBarrier(connection)
            } else if self.window.isEmpty {
                self.finish()
            }
            return
        }
        if self.outbound.readableBytes > 0 {
            let now = Self.now()
            if self.configuration.flush.shouldFlush(
                pendingBytes: self.outbound.readableBytes,
                oldestPendingAt: self.outboundSince,
                now: now
            ) || self.window.count >= limit {
                _ = self.flush(connection)
            } else if !self.flushScheduled,
                let delay = self.configuration.flush.delayUntilDue(oldestPendingAt: self.outboundSince, now: now)
            {
                self.flushScheduled = true
                self.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) { [weak self] in
                    guard let self else { return }
                    self.flushScheduled = false
                    if case .open(let connection) = self.state, self.outbound.readableBytes > 0 {
                        _ = self.flush(connection)
                    }
                    self.pump()
                }
            }
        }
    }

    /// Writes the encoded batch. False when the connection refused it (it is closing; `closed` settles).
    private func flush(_ connection: TLSConnection) -> Bool {
        let count = self.outbound.readableBytes
        do {
            try connection.write(self.outbound)
        } catch {
            return false
        }
        self.window.markWritten(ciphertextEnd: connection.ciphertextBytesWritten)
        self.report.bytesWritten += count
        self.outbound.clear()
        self.outboundSince = nil
        return true
    }

    /// A deliberately invalid notification (no device token): its error response proves that everything
    /// written before it was accepted.
    private func writeBarrier(_ connection: TLSConnection) {
        let identifier = self.window.record(SentWindow.barrierRow)
        switch self.configuration.template.command {
        case .framed:
            // 2 | frame length 7 | item 3 (identifier) only: missing device token, status 2.
            self.outbound.writeInteger(UInt8(2))
            self.outbound.writeInteger(UInt32(7))
            self.outbound.writeInteger(UInt8(3))
            self.outbound.writeInteger(UInt16(4))
            self.outbound.writeInteger(identifier)
        case .enhanced:
            // 1 | identifier | expiry 0 | token length 0 | payload length 0: missing device token, status 2.
            self.outbound.writeInteger(UInt8(1))
            self.outbound.writeInteger(identifier)
            self.outbound.writeInteger(UInt32(0))
            self.outbound.writeInteger(UInt16(0))
            self.outbound.writeInteger(UInt16(0))
        case .simple:
            preconditionFailure("command 0 has no identifier to answer a barrier with")
        }
        self.barrierWritten = true
        _ = self.flush(connection)
    }

    // MARK: - Settling

    private func received(_ bytes: ByteBuffer) {
        dispatchPrecondition(condition: .onQueue(self.queue))
        self.inbound.writeImmutableBuffer(bytes)
        do {
            while let response = try ErrorResponse.read(from: &self.inbound) {
                self.answer(response)
            }
        } catch {
            // Not an error response: the peer is not an APNs gateway. Nothing it said can be trusted.
            if case .open(let connection) = self.state { connection.abort() }
        }
    }

    private func answer(_ response: ErrorResponse) {
        guard case .open(let connection) = self.state else { return }
        self.answered = true
        self.state = .closing(connection)
        let settlement: SentWindow.Settlement
        do {
            settlement = try self.window.apply(response) { try self.source.token(at: $0.reference) }
        } catch {
            self.fail(JobError("\(error)"), notify: true)
            return
        }
        self.settle(settlement)
        // The gateway closes after an error response; there is nothing more to say on this connection.
        connection.close()
    }

    private func settle(_ settlement: SentWindow.Settlement) {
        var requeue: [TokenRow] = []
        self.report.confirmed += settlement.confirmed
        if let failed = settlement.failed, !failed.isBarrier, settlement.status != .shutdown {
            // Each error wastes what was written after the failed row: halve the flight while errors come,
            // so that it settles near a few times their spacing.
            self.flightLimit = max(Self.minimumFlight, min(self.windowCapacity, self.flightLimit / 2))
        } else if settlement.failed?.isBarrier == true {
            self.flightLimit = min(self.windowCapacity, 2 * self.flightLimit)
        }
        if let failed = settlement.failed, !failed.isBarrier, let status = settlement.status {
            let tries = self.processingErrors[failed.row.line, default: 0] + 1
            if status == .processingError && tries <= self.configuration.processingErrorRetries {
                self.processingErrors[failed.row.line] = tries
                requeue.append(failed.row)
            } else {
                self.reject(failed.row, status: status)
            }
        }
        if settlement.unknownIdentifier { self.report.unmatchedErrors += 1 }
        for entry in settlement.resend where !entry.isBarrier { requeue.append(entry.row) }
        self.report.resent += requeue.count

        let uncertain = settlement.uncertain.filter { !$0.isBarrier }
        if !uncertain.isEmpty {
            self.report.uncertainEvents += uncertain.count
            switch self.configuration.onUncertain {
            case .resend:
                requeue.append(contentsOf: uncertain.map(\.row))
                self.report.resent += uncertain.count
            case .report:
                self.report.uncertain += uncertain.count
            }
        }
        self.pending.prepend(contentsOf: requeue)
        self.barrierWritten = false
    }

    private func reject(_ row: TokenRow, status: ErrorStatus) {
        self.report.rejected["\(status.rawValue) \(status.name)", default: 0] += 1
        self.rejectedRows.append(
            RejectedRow(line: row.line, token: row.token.hexString, status: Int(status.rawValue), reason: status.name)
        )
    }

    /// Presumes accepted what the gateway has certainly read at least the settle time ago.
    ///
    /// What the gateway has read is bounded below by what its TCP acknowledged less the most its receive
    /// buffer can hold: acknowledged bytes it has not read sit in that buffer. (Command 0 cannot be
    /// confirmed by a barrier, so it presumes from the acknowledgement alone, or it could never finish a
    /// job smaller than that buffer.)
    private func settleByAge() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        guard case .open(let connection) = self.state else { return }
        let now = Self.now()
        guard now > self.configuration.settleNanoseconds else { return }
        var consumed = connection.ciphertextBytesAcknowledged
        if self.configuration.template.command != .simple { consumed -= self.configuration.peerReceiveBufferBytes }
        if consumed > 0 { self.window.observe(consumedThrough: consumed, at: now) }
        let wasFull = self.window.count >= min(self.flightLimit, self.windowCapacity)
        let presumed = self.window.presume(readBefore: now - self.configuration.settleNanoseconds)
        self.report.presumed += presumed
        if presumed > 0 {
            self.settledOnConnection = true
            self.flightLimit = min(self.windowCapacity, 2 * self.flightLimit)
        }
        if presumed > 0 && (wasFull || self.isDone || self.configuration.template.command == .simple) {
            if self.isDone {
                self.finish()
            } else {
                self.pump()
            }
        }
    }

    private func closed(_ end: ConnectionEnd) {
        dispatchPrecondition(condition: .onQueue(self.queue))
        if case .finished = self.state { return }
        // Rows encoded but never written go back first, unsent for certain.
        self.outbound.clear()
        self.outboundSince = nil
        if !self.answered {
            do {
                self.settle(try self.window.abandon { try self.source.token(at: $0.reference) })
            } catch {
                self.fail(JobError("\(error)"), notify: true)
                return
            }
            // A connection that settled something starts a new streak; one that settled nothing (the
            // gateway keeps dropping us) lengthens it, backing off further and eventually giving up.
            if end.reason != .closedLocally { self.failures = self.settledOnConnection ? 1 : self.failures + 1 }
            if end.error?.code == .handshakeRefused {
                self.fail(JobError("the gateway refused the client certificate: \(end)"), notify: true)
                return
            }
        } else {
            self.failures = 0
        }
        self.state = .idle
        if self.isDone {
            self.finish()
        } else if self.configuration.reconnect.givesUp(after: self.failures) {
            self.fail(JobError("the gateway closed \(self.failures) connections in a row: \(end)"), notify: true)
        } else {
            self.scheduleReconnect()
        }
    }

    // MARK: - Ending

    private func finish() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        switch self.state {
        case .open(let connection), .closing(let connection):
            self.state = .finished
            connection.onClose = nil
            connection.close()
        case .finished:
            return
        default:
            self.state = .finished
        }
        self.timer?.cancel()
        self.timer = nil
        self.completion?(.success(()))
        self.completion = nil
    }

    private func fail(_ error: JobError, notify: Bool) {
        switch self.state {
        case .open(let connection), .closing(let connection):
            connection.onClose = nil
            connection.abort()
        default:
            break
        }
        self.state = .finished
        self.timer?.cancel()
        self.timer = nil
        if notify { self.completion?(.failure(error)) } else { self.completion?(.success(())) }
        self.completion = nil
    }
}

/// Seconds since 1970, for expiry checks.
public func wallClockSeconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return now.tv_sec
}

#if canImport(Glibc)
import Glibc
#endif
