import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// The io_uring transport: `IORING_OP_SEND` / `IORING_OP_RECV` on a connected socket, completions
/// delivered by the context's `IORing` on its queue.
///
/// Buffers lent to the kernel stay alive until their completion: the receive buffer is owned here and
/// freed in `deinit`, which cannot run while an operation is in flight because the ring's slot keeps
/// this object alive until `close` has seen every completion. Send memory belongs to the caller, who
/// keeps it until `transportDidSend`. Confined to `ring.queue` (`@unchecked Sendable` for that reason).
final class UringTransport: Transport, IORingCompletionTarget, @unchecked Sendable {
    var delegate: TransportDelegate?
    private(set) var statistics = TransportStatistics()

    private let fd: Int32
    private let ring: IORing
    private var slot = -1
    private let receiveBuffer: UnsafeMutableRawBufferPointer
    private var sendCursor: UnsafeRawPointer?
    private var sendRemaining = 0
    private var sendInFlight = false
    private var receiveInFlight = false
    private var receiving = false
    private var sawEOF = false
    private var stopped = false
    private var closing = false
    private var closed = false
    private var retries = 0

    /// Takes ownership of the connected socket `fd` (closed by `close`).
    init(fd: Int32, ring: IORing, receiveBufferSize: Int) {
        self.fd = fd
        self.ring = ring
        receiveBuffer = .allocate(byteCount: receiveBufferSize, alignment: 64)
        // io_uring waits for readiness itself; a blocking descriptor keeps it from reporting EAGAIN.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 {
            _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        }
        slot = ring.register(self)
    }

    deinit {
        receiveBuffer.deallocate()
    }

    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        dispatchPrecondition(condition: .onQueue(ring.queue))
        precondition(!sendInFlight, "one send in flight per socket")
        guard !closing, !stopped else { return false }
        if bytes.count == 0 {
            return true
        }
        statistics.sends += 1
        sendCursor = bytes.baseAddress
        sendRemaining = bytes.count
        submitSend()
        return false
    }

    func startReceiving() {
        dispatchPrecondition(condition: .onQueue(ring.queue))
        receiving = true
        postReceiveIfIdle()
    }

    func pauseReceiving() {
        receiving = false
    }

    func resumeReceiving() {
        dispatchPrecondition(condition: .onQueue(ring.queue))
        receiving = true
        postReceiveIfIdle()
    }

    func shutdownOutput() {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    func close(reset: Bool) {
        dispatchPrecondition(condition: .onQueue(ring.queue))
        guard !closing else { return }
        closing = true
        if reset {
            Socket.setLingerZero(fd)
        }
        // Cancel rather than close under the kernel's feet: the file stays referenced (and no reset is
        // sent) while an operation is in flight.
        if sendInFlight {
            try? ring.cancel(slot: slot, operation: .send)
        }
        if receiveInFlight {
            try? ring.cancel(slot: slot, operation: .receive)
        }
        finishCloseIfIdle()
    }

    func ringDidComplete(operation: IORing.Operation, result: Int32) {
        switch operation {
        case .send: sendDidComplete(result)
        case .receive: receiveDidComplete(result)
        case .cancel: break
        }
    }

    private func sendDidComplete(_ result: Int32) {
        sendInFlight = false
        if closing {
            finishCloseIfIdle()
            return
        }
        switch Errno.completion("send", result) {
        case .success(let count):
            retries = 0
            statistics.bytesSent += count
            sendRemaining -= count
            sendCursor = sendCursor.map { $0 + count }
            if sendRemaining > 0 {
                statistics.partialSends += 1
                submitSend()
            } else {
                sendCursor = nil
                delegate?.transportDidSend()
            }
        case .retry:
            retries += 1
            if retries > 10_000 {
                fail(Errno.error("send", EAGAIN))
            } else {
                submitSend()
            }
        case .failure(let error):
            fail(error)
        }
    }

    private func receiveDidComplete(_ result: Int32) {
        receiveInFlight = false
        if closing {
            finishCloseIfIdle()
            return
        }
        switch Errno.completion("recv", result) {
        case .success(0):
            sawEOF = true
            delegate?.transportDidReachEOF()
        case .success(let count):
            statistics.receives += 1
            statistics.bytesReceived += count
            delegate?.transportDidReceive(UnsafeRawBufferPointer(start: receiveBuffer.baseAddress, count: count))
            postReceiveIfIdle()
        case .retry:
            postReceiveIfIdle()
        case .failure(let error):
            fail(error)
        }
    }

    private func submitSend() {
        guard let cursor = sendCursor else { return }
        do {
            try ring.send(slot: slot, fd: fd, bytes: cursor, count: sendRemaining)
            sendInFlight = true
        } catch {
            fail(error as? SalvoIOError ?? Errno.error("io_uring_submit", EIO))
        }
    }

    private func postReceiveIfIdle() {
        guard receiving, !receiveInFlight, !sawEOF, !stopped, !closing else { return }
        do {
            try ring.receive(slot: slot, fd: fd, into: receiveBuffer.baseAddress!, count: receiveBuffer.count)
            receiveInFlight = true
        } catch {
            fail(error as? SalvoIOError ?? Errno.error("io_uring_submit", EIO))
        }
    }

    private func fail(_ error: SalvoIOError) {
        guard !stopped else { return }
        stopped = true
        delegate?.transportDidFail(error)
    }

    private func finishCloseIfIdle() {
        guard closing, !closed, !sendInFlight, !receiveInFlight else { return }
        closed = true
        _ = Glibc.close(fd)
        ring.unregister(slot: slot)
        let delegate = self.delegate
        self.delegate = nil
        // Report from a fresh turn of the queue, as the socket transport does (its cancel handlers run
        // later): `onClose` never runs inside the caller's `close` or `abort`.
        let report = UncheckedSendable(delegate)  // used on ring.queue only
        ring.queue.async { report.value?.transportDidClose() }
    }
}
