import APNSWire
import Dispatch
import Logging
import NIOCore
internal import SalvoIO
import SalvoRows

/// One gateway connection's share of a job, as I/O: connects, encodes the rows its `BinaryConnectionMachine`
/// hands out into one preallocated buffer, writes batches, reads error responses, runs the timers — and carries
/// out whatever the machine decides. Every protocol decision is the machine's.
///
/// Confined to `queue`: every method and callback runs there (`dispatchPrecondition` at the entry points),
/// which is why it is `@unchecked Sendable`. Nothing is shared with other shards but the token source (taken a
/// chunk at a time) and the final outcomes (merged by the job).
///
/// Hot path, per notification: the machine pops and journals a row, the template copies the frame and patches
/// token and identifier — no allocation, no lock, no system call. Per batch: one TLS write and one submission.
final class Shard: @unchecked Sendable {
    let index: Int
    let queue: DispatchQueue
    private let configuration: BinaryJobConfiguration
    private let tls: TLSContext
    private let context: IOContext
    private let source: TokenSource
    private let pacer: ConnectPacer
    /// Rows this shard had settled when it last told the pacer.
    private var settledReported = 0
    /// Which of the gateway name's addresses to connect to (`ConnectionOptions.addressChoice`): the shard's own
    /// number, so shards spread over every address, moved on by each failed connect.
    private var addressTurn: Int
    // Touched for every row, only on `queue` (every entry point asserts it), and never handed out `inout` while
    // another access is open: exempt from dynamic exclusivity checks, as `CSVReader`'s state is.
    @exclusivity(unchecked) private(set) var machine: BinaryConnectionMachine
    private var connection: TLSConnection?
    @exclusivity(unchecked) private var outbound: ByteBuffer
    /// The largest frame a row can have (the fixed payload's, or the largest a row's payload may render to).
    private let largestFrame: Int
    private var inbound = ByteBuffer()
    /// With a payload per row: the fields of the chunk taken last, and of one row read again (sent again after
    /// its chunk was replaced); a row read again that no longer renders stops the job.
    @exclusivity(unchecked) private var fields = RowFields()
    @exclusivity(unchecked) private var refetched = RowFields()
    private var renderFailure: InputError?
    /// Where the shard reads the time and sets its timers (`BinaryJobConfiguration.clock`).
    private let clock: any JobClock
    private var completion: ((Result<Void, JobError>) -> Void)?
    private var logger: Logger

    init(
        index: Int,
        configuration: BinaryJobConfiguration,
        tls: TLSContext,
        source: TokenSource,
        pacer: ConnectPacer,
        windowCapacity: Int
    ) throws {
        self.pacer = pacer
        self.index = index
        self.addressTurn = index
        self.queue = DispatchQueue(label: "salvo.shard.\(index)")
        self.configuration = configuration
        self.clock = configuration.clock
        self.tls = tls
        self.context = try IOContext(queue: self.queue, transport: configuration.transport?.kind)
        self.source = source
        self.logger = configuration.logger
        self.logger[metadataKey: "shard"] = "\(index)"
        let template = configuration.template
        self.machine = BinaryConnectionMachine(
            configuration: .init(configuration, windowCapacity: windowCapacity),
            files: source.files,
            seed: UInt64(index) &+ 0x5A17_0000,
            journal: configuration.journal
        )
        // Room for a full batch plus one frame and a barrier, so a batch never makes the buffer grow.
        let frameByteCount =
            source.payloads.map { template.frameByteCount(payloadCount: $0.maximumByteCount) }
            ?? template.frameByteCount
        self.largestFrame = frameByteCount
        self.outbound = ByteBufferAllocator().buffer(capacity: configuration.flush.bytes + 2 * frameByteCount + 16)
    }

    var transportKind: TransportKind { self.context.transport }

    /// Starts the shard; `completion` runs on `queue` once every row it took is settled, or the job cannot go on.
    func start(completion: @escaping @Sendable (Result<Void, JobError>) -> Void) {
        self.queue.async {
            self.completion = completion
            // Stopped before it started (another shard failed first, while this one's start waited for its turn):
            // it ends at once, having taken no row. Started, its machine would refuse the start and never end.
            if case .failed = self.machine.state { return self.end(.success(()), abort: true) }
            self.scheduleTick()
            self.perform(self.machine.start(now: self.clock.now))
        }
    }

    /// The watchdog: every eighth of the settle time, until the shard ends.
    private func scheduleTick() {
        let period = max(self.configuration.settle.nanoseconds / 8, 1_000_000)
        self.clock.schedule(after: period, on: self.queue) { [weak self] in
            guard let self, self.completion != nil else { return }
            self.tick()
            self.scheduleTick()
        }
    }

    /// Stops taking rows; the rows in flight have `grace` to settle, then the shard stops.
    func drain(grace: Duration) {
        self.queue.async {
            guard self.completion != nil else { return }
            self.perform(self.machine.interrupt())
            self.clock.schedule(after: grace.nanoseconds, on: self.queue) {
                guard self.completion != nil else { return }
                self.machine.stop()
                self.end(.success(()), abort: true)
            }
        }
    }

    /// Stops at once (another shard hit a fatal error): closes the connection, keeps the counts.
    func stop() {
        self.queue.async {
            self.machine.stop()
            self.end(.success(()), abort: true)
        }
    }

    // MARK: - Carrying out

    private func perform(_ action: BinaryConnectionMachine.Action) {
        dispatchPrecondition(condition: .onQueue(self.queue))
        switch action {
        case .none:
            break
        case .connect:
            // Every connect of the job takes a slot from the shared pacer.
            let now = self.clock.now
            let giveUpAfter = self.configuration.reconnect.giveUpAfter.nanoseconds
            let at = self.pacer.slot(
                earliest: now,
                latest: giveUpAfter > 0 ? self.pacer.lastProgressAt &+ giveUpAfter : .max
            )
            guard at > now else { return self.connect() }
            self.clock.schedule(after: at - now, on: self.queue) { [weak self] in
                guard let self, case .connecting = self.machine.state else { return }
                self.connect()
            }
        case .reconnect(let delay):
            self.logger.info("reconnect", metadata: ["after-ms": "\(delay / 1_000_000)"])
            self.clock.schedule(after: delay, on: self.queue) { [weak self] in
                guard let self else { return }
                self.perform(self.machine.reconnectDue(now: self.clock.now))
            }
        case .write, .needRows, .flush, .writeBarrier:
            self.pump(first: action)
        case .scheduleFlush(let delay):
            self.clock.schedule(after: delay, on: self.queue) { [weak self] in
                guard let self else { return }
                self.perform(self.machine.flushDue())
            }
        case .close:
            self.connection?.close()
        case .abort:
            self.connection?.abort()
        case .finish:
            self.end(.success(()), abort: false)
        case .fail(let error):
            self.end(.failure(error), abort: true)
        case .impossible(let event):
            self.logger.error("internal error: the connection machine got \(event.rawValue)")
            self.connection?.abort()
        }
    }

    private var connectionOptions: ConnectionOptions {
        var options = ConnectionOptions()
        options.connectTimeout = self.configuration.connectTimeout
        options.handshakeTimeout = self.configuration.handshakeTimeout
        options.addressChoice = self.addressTurn
        options.proxy = self.configuration.proxy
        return options
    }

    private func connect() {
        TLSConnection.connect(
            host: self.configuration.host,
            port: self.configuration.port,
            serverName: self.configuration.serverName,
            tls: self.tls,
            context: self.context,
            options: self.connectionOptions
        ) { result in
            switch result {
            case .success(let connection):
                self.logger.info("connected", metadata: self.peers)
                self.opened(connection)
            case .failure(let error):
                var metadata = self.peers
                metadata["error"] = "\(error)"
                self.logger.warning("connect failed", metadata: metadata)
                let failure = BinaryConnectionMachine.ConnectFailure(error)
                if case .unreachable = failure {
                    self.pacer.refused()
                    self.addressTurn &+= 1
                }
                self.machine.noteProgress(at: self.pacer.lastProgressAt)
                self.perform(self.machine.connectFailed(failure, now: self.clock.now))
            }
        }
    }

    /// Who a connection's log lines name: the gateway, and the proxy when the connection goes through one (its
    /// TCP peer is then the proxy, not the gateway; the description holds no password).
    private var peers: Logger.Metadata {
        var metadata: Logger.Metadata = ["gateway": "\(self.configuration.host):\(self.configuration.port)"]
        if let proxy = self.configuration.proxy { metadata["proxy"] = "\(proxy)" }
        return metadata
    }

    private func opened(_ connection: TLSConnection) {
        self.pacer.connected()
        let action = self.machine.opened()
        guard case .open = self.machine.state else {
            connection.close()
            return self.perform(action)
        }
        self.connection = connection
        self.inbound.clear()
        self.outbound.clear()
        connection.onPlaintext = { [weak self] bytes in self?.received(bytes) }
        connection.onWritable = { [weak self] in self?.perform(.write) }
        connection.onClose = { [weak self] end in self?.closed(end, connection: connection) }
        self.perform(action)
    }

    /// Encodes and writes while the machine hands out rows.
    private func pump(first: BinaryConnectionMachine.Action) {
        guard let connection = self.connection else { return }
        let template = self.configuration.template
        var action = first
        while true {
            switch action {
            case .write:
                break
            case .needRows:
                do {
                    if let chunk = try self.source.nextChunk(
                        maximumRows: self.configuration.chunkRows,
                        fields: &self.fields
                    ) {
                        self.machine.rowsArrived(chunk)
                    } else {
                        self.machine.sourceExhausted()
                    }
                } catch {
                    return self.perform(self.machine.inputFailed(error.description))
                }
            case .flush:
                guard self.flush(connection) else { return }
            case .writeBarrier(let identifier):
                BarrierFrame.write(command: template.command, identifier: identifier, to: &self.outbound)
                _ = self.flush(connection)
                return
            default:
                return self.perform(action)
            }
            // The frames of a batch go into the buffer's writable memory, taken once for the batch and not per frame
            // (a `ByteBuffer` written per frame checks its storage's room and uniqueness, and the exclusivity of its
            // storage, per frame). The machine ends a batch once its frames reach the flush threshold, so a batch
            // writes at most the threshold and one frame more: the room reserved (each frame checks it).
            self.outbound.reserveCapacity(minimumWritableBytes: self.configuration.flush.bytes + self.largestFrame)
            var written = 0
            if self.source.payloads != nil {
                action = self.outbound.withUnsafeMutableWritableBytes { out in
                    self.machine.writeSized(
                        queuedBytes: connection.queuedBytes,
                        now: self.clock.now,
                        wallSeconds: wallClockSeconds()
                    ) { row, identifier in
                        let size = self.encode(
                            row,
                            identifier: identifier,
                            template: template,
                            into: UnsafeMutableRawBufferPointer(rebasing: out[written...])
                        )
                        written &+= size
                        return size
                    }
                }
                self.outbound.moveWriterIndex(forwardBy: written)
                if let failure = self.renderFailure {
                    return self.perform(self.machine.sourceFailed(failure.description))
                }
            } else {
                action = self.outbound.withUnsafeMutableWritableBytes { out in
                    self.machine.write(
                        queuedBytes: connection.queuedBytes,
                        now: self.clock.now,
                        wallSeconds: wallClockSeconds()
                    ) { row, identifier in
                        written &+= template.write(
                            token: row.token,
                            identifier: identifier,
                            into: UnsafeMutableRawBufferPointer(rebasing: out[written...])
                        )
                    }
                }
                self.outbound.moveWriterIndex(forwardBy: written)
            }
        }
    }

    /// Encodes a row's frame with its own payload into the batch; returns the frame's size. A row of the chunk taken
    /// last finds its payload at hand; one sent again after its chunk was replaced is read again from its file (as
    /// its token was) and rendered again.
    private func encode(
        _ row: TokenRow,
        identifier: UInt32,
        template: FrameTemplate,
        into out: UnsafeMutableRawBufferPointer
    ) -> Int {
        if let index = self.fields.index(of: row.reference) {
            return Self.write(row, identifier: identifier, fieldsAt: index, of: &self.fields, template, out)
        }
        do {
            try self.source.fields(at: row.reference, into: &self.refetched)
        } catch {
            // Nothing is written for the row: the job stops once the batch loop returns.
            self.renderFailure = error
            return 0
        }
        return Self.write(row, identifier: identifier, fieldsAt: 0, of: &self.refetched, template, out)
    }

    /// Row `index` of `rows`'s frame, written at the start of `out`: its payload, rendered when its chunk was
    /// taken, copied after the frame's fields. Static, with `rows` passed `inout`: called from a closure that can
    /// reach the shard, a method of `self.fields` would make Swift copy the struct first (a retain and a release of
    /// each of its arrays a row).
    private static func write(
        _ row: TokenRow,
        identifier: UInt32,
        fieldsAt index: Int,
        of rows: inout RowFields,
        _ template: FrameTemplate,
        _ out: UnsafeMutableRawBufferPointer
    ) -> Int {
        rows.withPayload(index) { payload in
            template.write(token: row.token, identifier: identifier, payload: payload, into: out)
        }
    }

    /// Writes the encoded batch. False when the connection refused it (it is closing; `closed` settles).
    private func flush(_ connection: TLSConnection) -> Bool {
        let count = self.outbound.readableBytes
        let start = connection.ciphertextBytesWritten
        do {
            try connection.write(self.outbound)
        } catch {
            return false
        }
        self.machine.flushed(
            bytes: count,
            ciphertextStart: start,
            ciphertextEnd: connection.ciphertextBytesWritten,
            now: self.clock.now
        )
        self.outbound.clear()
        return true
    }

    private func received(_ bytes: ByteBuffer) {
        dispatchPrecondition(condition: .onQueue(self.queue))
        self.inbound.writeImmutableBuffer(bytes)
        do {
            while let response = try ErrorResponse.read(from: &self.inbound) {
                self.logger.info(
                    "error response",
                    metadata: [
                        "status": "\(response.status.rawValue)", "reason": "\(response.status.reasonName)",
                        "identifier": "\(response.identifier)",
                    ]
                )
                self.perform(self.machine.received(response, now: self.clock.now, resolve: self.resolve))
            }
            self.reportProgress()
        } catch {
            let sample = self.inbound.readableBytesView.prefix(16).map { byte in
                String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
            }
            self.perform(self.machine.receivedGarbage("first bytes " + sample.joined()))
        }
    }

    /// Tells the pacer when this shard settled rows, so that other shards know the gateway is alive.
    private func reportProgress() {
        let settled = self.machine.outcomes.settled
        guard settled > self.settledReported else { return }
        self.settledReported = settled
        self.pacer.progressed(at: self.clock.now)
    }

    private func resolve(_ journaled: SentWindow.Journaled) throws(InputError) -> DeviceToken {
        try self.source.token(at: journaled.reference)
    }

    private func tick() {
        guard let connection = self.connection else { return }
        self.perform(self.machine.tick(acknowledged: connection.ciphertextBytesAcknowledged, now: self.clock.now))
        self.reportProgress()
    }

    private func closed(_ end: ConnectionEnd, connection: TLSConnection) {
        dispatchPrecondition(condition: .onQueue(self.queue))
        guard self.connection === connection else { return }
        self.connection = nil
        let cause: BinaryConnectionMachine.CloseCause
        if end.error?.code == .handshakeRefused {
            cause = .certificateRefused(end.description)
        } else {
            cause = end.reason == .closedLocally ? .local : .remote(end.description)
        }
        let sent = connection.statistics.bytesSent
        self.logger.info("closed", metadata: ["cause": "\(end.description)", "bytes-sent": "\(sent)"])
        self.machine.noteProgress(at: self.pacer.lastProgressAt)
        self.perform(
            self.machine.closed(
                cause,
                sentThrough: sent,
                acknowledged: connection.ciphertextBytesAcknowledgedAtEnd,
                now: self.clock.now,
                resolve: self.resolve
            )
        )
        if self.machine.lastClosedOnConnect { self.pacer.refused() }
    }

    private func end(_ result: Result<Void, JobError>, abort: Bool) {
        self.machine.leaveUnsettled(resolve: self.resolve)
        if let connection = self.connection {
            self.connection = nil
            connection.onClose = nil
            if abort { connection.abort() } else { connection.close() }
        }
        self.completion?(result)
        self.completion = nil
    }
}
