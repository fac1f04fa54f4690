import Dispatch
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A TLS connection over a socket: a `TLSSession` plus a transport (io_uring or non-blocking sockets),
/// confined to its `IOContext`'s serial queue.
///
/// Writing: `write` encrypts a whole plaintext batch with one SSL_write into the filling ciphertext
/// buffer; while no send is in flight that buffer is handed to the transport at once (one submission).
/// Two ciphertext buffers alternate — one lent to the kernel until its send completes, one filling —
/// so bytes stay in order and SalvoIO allocates nothing per batch in steady state (OpenSSL 3.0's record
/// layer itself still makes about two small allocations per TLS record, measured with a malloc counter).
///
/// Reading is continuous: decrypted plaintext goes to `onPlaintext` whenever the peer sends some.
/// `onClose` reports how the connection ended (`ConnectionEnd`), exactly once.
///
/// Lifetime: an open connection keeps itself alive (its transport's pending receive holds it) until it
/// is closed, by `close`, `abort`, the peer or an error; `onClose` marks the end.
///
/// Every method must be called on `queue`, and every callback runs there. `@unchecked Sendable`
/// because all mutable state is confined to `queue`.
public final class TLSConnection: @unchecked Sendable {
    enum State {
        case handshaking
        case open
        case closing
        case closed
    }

    /// The serial queue confining this connection.
    public let queue: DispatchQueue
    /// The transport carrying this connection's bytes.
    public let transportKind: TransportKind

    /// Decrypted bytes from the peer, in order. The buffer is reused after the call returns: keeping it
    /// costs a copy-on-write, so copy out what you need.
    public var onPlaintext: ((ByteBuffer) -> Void)?
    /// A send that had to wait for the kernel completed, so `queuedBytes` dropped: write the next batch
    /// now (it overlaps with the send just started). Not called when the kernel takes a batch at once
    /// during `write`; a producer keeps writing while `queuedBytes` is small and waits for this otherwise.
    public var onWritable: (() -> Void)?
    /// The connection ended; called once, after the descriptor is closed.
    public var onClose: ((ConnectionEnd) -> Void)?

    let session: TLSSession
    private let transport: Transport
    private let fd: Int32
    private let options: ConnectionOptions
    private var state = State.handshaking
    // Ciphertext lent to the transport; the session's `buffers.outbound` is the one filling.
    private var inFlight: ByteBuffer
    private var sending = false
    private var plaintext: ByteBuffer
    private var handshakeCompletion: ((Result<TLSConnection, SalvoIOError>) -> Void)?
    private var handshakeError: SalvoIOError?
    private var end: ConnectionEnd?
    private var peerFinished = false
    private var peerSentCloseNotify = false
    private var outputShut = false
    private var resetOnTeardown = false
    private var timer: DispatchSourceTimer?

    package init(
        fd: Int32,
        context: IOContext,
        tls: TLSContext,
        serverName: String?,
        peerKey: String?,
        options: ConnectionOptions
    ) throws {
        queue = context.queue
        transportKind = context.transport
        self.fd = fd
        self.options = options
        session = try TLSSession(
            context: tls,
            serverName: serverName,
            peerKey: peerKey,
            outboundCapacity: options.ciphertextBufferCapacity
        )
        inFlight = ByteBufferAllocator().buffer(capacity: options.ciphertextBufferCapacity)
        plaintext = ByteBufferAllocator().buffer(capacity: options.plaintextChunkSize)
        if let ring = context.ring {
            transport = UringTransport(fd: fd, ring: ring, receiveBufferSize: options.receiveBufferSize)
        } else {
            transport = SocketTransport(fd: fd, queue: context.queue, receiveBufferSize: options.receiveBufferSize)
        }
    }

    // MARK: - Public API

    /// Whether the handshake resumed a cached session (clients cache one per host and port).
    public var isSessionReused: Bool { onQueue { session.isSessionReused } }
    /// The negotiated protocol version, e.g. "TLSv1.3".
    public var protocolVersion: String { onQueue { session.protocolVersion } }
    /// The negotiated cipher suite.
    public var cipherName: String { onQueue { session.cipherName } }
    /// The peer certificate subject's UID attribute (APNs: the app's topic), if any.
    public var peerSubjectUID: String? { onQueue { session.peerSubjectUID } }
    /// The peer certificate's subject, if the peer presented a certificate.
    public var peerSubject: String? { onQueue { session.peerSubject } }
    /// Counters of the underlying transport (sends, partial sends, bytes).
    public var statistics: TransportStatistics { onQueue { transport.statistics } }
    /// Ciphertext bytes written but not yet completely handed to the kernel (an upper bound).
    public var queuedBytes: Int {
        session.buffers.outbound.readableBytes + (sending ? inFlight.readableBytes : 0)
    }

    /// Ciphertext produced so far, sent or still queued (handshake included): the stream offset at which
    /// everything written until now ends.
    public var ciphertextBytesWritten: Int {
        dispatchPrecondition(condition: .onQueue(queue))
        return transport.statistics.bytesSent + queuedBytes
    }

    /// Ciphertext the peer's TCP has acknowledged, as a stream offset comparable with
    /// `ciphertextBytesWritten`: what was handed to the kernel less what is still in the socket's send queue
    /// (`SIOCOUTQ`). A lower bound; 0 once the connection is closed. Acknowledged is not read: the bytes
    /// may still wait in the peer's receive buffer.
    public var ciphertextBytesAcknowledged: Int {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state == .open || state == .closing else { return 0 }
        var unacknowledged: Int32 = 0
        // SIOCOUTQ (= TIOCOUTQ): bytes in the send queue not yet acknowledged by the peer.
        guard ioctl(fd, UInt(TIOCOUTQ), &unacknowledged) == 0 else { return 0 }
        return max(0, transport.statistics.bytesSent - Int(unacknowledged))
    }

    /// Ciphertext the peer's TCP had acknowledged when the connection ended, as a stream offset comparable with
    /// `ciphertextBytesWritten`: read from the kernel just before the descriptor closed, so bytes a reset left
    /// unacknowledged are not counted. nil while the connection lasts, or when the kernel does not say.
    public private(set) var ciphertextBytesAcknowledgedAtEnd: Int?

    /// Encrypts all of `plaintext` (one SSL_write) and sends it after anything written before.
    /// Throws `.connectionClosed` once closing or closed.
    public func write(_ plaintext: ByteBuffer) throws {
        try plaintext.withUnsafeReadableBytes { try write(bytes: $0) }
    }

    /// Like `write(_:)`, for plaintext held elsewhere (only read during the call).
    public func write(bytes: UnsafeRawBufferPointer) throws {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state == .open else {
            throw SalvoIOError(.connectionClosed, "write after the connection was closed or while it closes")
        }
        do {
            try session.write(bytes)
        } catch let error as SalvoIOError {
            fail(error)
            throw error
        }
        flush()
    }

    /// Closes in order: sends close_notify and what was written before it, half-closes, waits (at most
    /// `closeTimeout`) for the peer's close_notify or EOF, then closes the socket. `onClose` follows.
    public func close() {
        dispatchPrecondition(condition: .onQueue(queue))
        switch state {
        case .handshaking:
            handshakeError = SalvoIOError(.connectionClosed, "closed before the handshake finished")
            teardown(ConnectionEnd(reason: .closedLocally))
        case .open:
            beginClosing(ConnectionEnd(reason: .closedLocally))
        case .closing, .closed:
            break
        }
    }

    /// Drops the connection at once with a reset (`SO_LINGER` 0): nothing queued is sent.
    public func abort() {
        dispatchPrecondition(condition: .onQueue(queue))
        resetOnTeardown = true
        if state == .handshaking {
            handshakeError = SalvoIOError(.connectionClosed, "aborted before the handshake finished")
        }
        teardown(ConnectionEnd(reason: .closedLocally))
    }

    /// Stops reading from the socket (the peer's sends then stall once buffers fill). For test peers that
    /// play a slow reader; a sender never stops reading its gateway's answers.
    package func pauseReading() {
        dispatchPrecondition(condition: .onQueue(queue))
        transport.pauseReceiving()
    }

    /// Continues reading after `pauseReading`.
    package func resumeReading() {
        dispatchPrecondition(condition: .onQueue(queue))
        if state != .closed {
            transport.resumeReceiving()
        }
    }

    private func onQueue<Value>(_ body: () -> Value) -> Value {
        dispatchPrecondition(condition: .onQueue(queue))
        return body()
    }

    // MARK: - Handshake

    /// Starts the handshake; `completion` runs on `queue` once it succeeded or failed. Set the callbacks
    /// inside `completion`: plaintext that arrived with the handshake is delivered right after it returns.
    package func start(completion: @escaping (Result<TLSConnection, SalvoIOError>) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        handshakeCompletion = completion
        transport.delegate = self
        armTimer(options.handshakeTimeout) { connection in
            connection.handshakeError = SalvoIOError(
                .timedOut,
                "the TLS handshake did not finish in time; is the peer a TLS server on this port?"
            )
            connection.teardown(ConnectionEnd(reason: .failed, error: connection.handshakeError))
        }
        transport.startReceiving()
        if session.context.role == .client {
            advance()
        }
    }

    /// Runs the session on whatever ciphertext is lent: handshake first, then reads.
    private func advance() {
        if state == .handshaking {
            switch session.handshake() {
            case .complete:
                state = .open
                cancelTimer()
                flush()
                let completion = handshakeCompletion
                handshakeCompletion = nil
                completion?(.success(self))
            case .wantRead:
                flush()
                return
            case .closed:
                failHandshake(SalvoIOError(.handshakeFailed, "the peer closed during the TLS handshake"))
                return
            case .failed(let error):
                failHandshake(error)
                return
            }
        }
        readAvailable()
    }

    private func failHandshake(_ error: SalvoIOError) {
        handshakeError = error
        // Send the alert OpenSSL queued (it tells the peer why), then close.
        state = .closing
        end = ConnectionEnd(reason: .failed, error: error)
        peerFinished = true
        flush()
        armTimer(options.closeTimeout) { $0.teardown($0.end ?? ConnectionEnd(reason: .failed, error: error)) }
        finishClosingIfDone()
    }

    // MARK: - Reading

    private func readAvailable() {
        // Bounded: each pass either fills a chunk (consuming lent ciphertext) or stops. A callback that
        // closes or aborts ends the loop.
        for _ in 0..<1_000_000 {
            guard state == .open || state == .closing else { return }
            let step = session.read(into: &plaintext, limit: options.plaintextChunkSize)
            deliverPlaintext()
            switch step {
            case .complete:
                continue
            case .wantRead:
                flush()
                return
            case .closed:
                peerSentCloseNotify = true
                peerFinished = true
                if state == .open {
                    beginClosing(ConnectionEnd(reason: .peerClosed, peerSentCloseNotify: true))
                } else {
                    flush()
                    finishClosingIfDone()
                }
                return
            case .failed(let error):
                fail(error)
                return
            }
        }
    }

    private func deliverPlaintext() {
        guard plaintext.readableBytes > 0 else { return }
        if state != .closed {
            onPlaintext?(plaintext)
        }
        // Unique again unless the callback kept the buffer; then clear() copies, as it must.
        plaintext.clear()
    }

    // MARK: - Writing

    /// Hands the filling ciphertext buffer to the transport if no send is in flight. A send that the
    /// kernel takes whole at once (non-blocking sockets) is finished here, in a loop, not by recursion.
    private func flush() {
        // Bounded: each pass sends the filling buffer, which only refills if a callback writes again.
        for _ in 0..<1_000_000 {
            guard !sending, state != .closed, session.buffers.outbound.readableBytes > 0 else { return }
            swap(&inFlight, &session.buffers.outbound)
            sending = true
            // The pointer stays valid until the send is done: `inFlight` is neither mutated nor released
            // while `sending` is true, and this connection outlives the transport's operations.
            let bytes = inFlight.withUnsafeReadableBytes { $0 }
            guard transport.send(bytes) else { return }
            inFlight.clear()
            sending = false
        }
    }

    // MARK: - Closing

    private func beginClosing(_ end: ConnectionEnd) {
        state = .closing
        self.end = end
        session.shutdown()
        flush()
        armTimer(options.closeTimeout) { connection in
            connection.teardown(connection.end ?? ConnectionEnd(reason: .closedLocally))
        }
        finishClosingIfDone()
    }

    /// In `.closing`: once everything (close_notify included) is sent, half-close; once the peer has
    /// finished too, close.
    private func finishClosingIfDone() {
        guard state == .closing, !sending, session.buffers.outbound.readableBytes == 0 else { return }
        if !outputShut {
            outputShut = true
            transport.shutdownOutput()
        }
        if peerFinished {
            teardown(end ?? ConnectionEnd(reason: .closedLocally))
        }
    }

    private func fail(_ error: SalvoIOError) {
        if state == .handshaking {
            handshakeError = error
        }
        let reason: ConnectionEnd.Reason = error.code == .connectionReset ? .reset : .failed
        teardown(ConnectionEnd(reason: reason, peerSentCloseNotify: peerSentCloseNotify, error: error))
    }

    private func teardown(_ end: ConnectionEnd) {
        guard state != .closed else { return }
        state = .closed
        if self.end == nil || self.end?.reason == .closedLocally && end.reason != .closedLocally {
            self.end = end
        }
        cancelTimer()
        ciphertextBytesAcknowledgedAtEnd = Socket.bytesAcknowledged(fd).map { min($0, transport.statistics.bytesSent) }
        transport.close(reset: resetOnTeardown)
    }

    // MARK: - Timers

    private func armTimer(_ delay: Duration, _ fire: @escaping (TLSConnection) -> Void) {
        cancelTimer()
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + delay.dispatchInterval)
        let box = UncheckedSendable(fire)  // the timer fires on `queue`, where `fire` was made
        timer.setEventHandler { [weak self] in
            if let self {
                box.value(self)
            }
        }
        self.timer = timer
        timer.resume()
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }
}

extension TLSConnection: TransportDelegate {
    func transportDidSend() {
        inFlight.clear()
        sending = false
        flush()
        if state == .open {
            onWritable?()
        } else if state == .closing {
            finishClosingIfDone()
        }
    }

    func transportDidReceive(_ bytes: UnsafeRawBufferPointer) {
        session.receive(bytes)
        advance()
        session.releaseInbound()
    }

    func transportDidReachEOF() {
        switch state {
        case .handshaking:
            fail(
                SalvoIOError(
                    .handshakeFailed,
                    "the peer closed the connection during the TLS handshake; it may require a client certificate "
                        + "or refuse our protocol versions"
                )
            )
        case .open:
            peerFinished = true
            teardown(ConnectionEnd(reason: .peerClosed, peerSentCloseNotify: peerSentCloseNotify))
        case .closing:
            peerFinished = true
            finishClosingIfDone()
        case .closed:
            break
        }
    }

    func transportDidFail(_ error: SalvoIOError) {
        fail(error)
    }

    func transportDidClose() {
        if let completion = handshakeCompletion {
            handshakeCompletion = nil
            completion(
                .failure(
                    handshakeError ?? end?.error
                        ?? SalvoIOError(.handshakeFailed, "the connection closed during the TLS handshake")
                )
            )
        } else {
            onClose?(end ?? ConnectionEnd(reason: .closedLocally))
        }
        // Break the cycles user callbacks may form with this connection.
        onPlaintext = nil
        onWritable = nil
        onClose = nil
    }
}
