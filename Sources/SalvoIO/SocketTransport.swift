import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// The fallback transport: a non-blocking socket with a `DispatchSource` read source (receive loop) and
/// a write source (resumed only while a send waits for buffer space).
///
/// Send memory belongs to the caller until `transportDidSend`; the receive buffer is owned here.
/// Confined to `queue` (`@unchecked Sendable` for that reason); the descriptor is closed in the sources'
/// cancel handlers, after Dispatch has stopped watching it.
final class SocketTransport: Transport, @unchecked Sendable {
    var delegate: TransportDelegate?
    private(set) var statistics = TransportStatistics()

    private let fd: Int32
    private let queue: DispatchQueue
    private let readSource: DispatchSourceRead
    private let writeSource: DispatchSourceWrite
    private var readSuspended = true
    private var writeSuspended = true
    private let receiveBuffer: UnsafeMutableRawBufferPointer
    private var sendCursor: UnsafeRawPointer?
    private var sendRemaining = 0
    private var receiving = false
    private var sawEOF = false
    private var stopped = false
    private var closing = false
    private var pendingCancels = 2

    /// Takes ownership of the connected socket `fd` (closed by `close`).
    init(fd: Int32, queue: DispatchQueue, receiveBufferSize: Int) {
        self.fd = fd
        self.queue = queue
        receiveBuffer = .allocate(byteCount: receiveBufferSize, alignment: 64)
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 {
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        }
        readSource = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        writeSource = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        // The sources hold this object until they are cancelled (in `close`), which keeps the receive
        // buffer alive for as long as a handler can run.
        readSource.setEventHandler { self.readable() }
        writeSource.setEventHandler { _ = self.continueSend(notify: true) }
        let cancelled: @Sendable () -> Void = { self.sourceCancelled() }
        readSource.setCancelHandler(handler: cancelled)
        writeSource.setCancelHandler(handler: cancelled)
    }

    deinit {
        receiveBuffer.deallocate()
    }

    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        precondition(sendCursor == nil, "one send in flight per socket")
        guard !closing, !stopped else { return false }
        if bytes.count == 0 {
            return true
        }
        statistics.sends += 1
        sendCursor = bytes.baseAddress
        sendRemaining = bytes.count
        return continueSend(notify: false)
    }

    func startReceiving() {
        resumeReceiving()
    }

    func pauseReceiving() {
        dispatchPrecondition(condition: .onQueue(queue))
        receiving = false
        if !readSuspended {
            readSuspended = true
            readSource.suspend()
        }
    }

    func resumeReceiving() {
        dispatchPrecondition(condition: .onQueue(queue))
        receiving = true
        if readSuspended, !sawEOF, !stopped, !closing {
            readSuspended = false
            readSource.resume()
        }
    }

    func shutdownOutput() {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    func close(reset: Bool) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closing else { return }
        closing = true
        if reset {
            Socket.setLingerZero(fd)
        }
        // A suspended source never runs its cancel handler: resume before cancelling.
        readSource.cancel()
        writeSource.cancel()
        if readSuspended {
            readSuspended = false
            readSource.resume()
        }
        if writeSuspended {
            writeSuspended = false
            writeSource.resume()
        }
    }

    /// Sends what is left; returns true when it is all sent. `notify` (from the write source) reports
    /// that through `transportDidSend`; from `send` the return value does.
    private func continueSend(notify: Bool) -> Bool {
        guard !closing, !stopped, var cursor = sendCursor else {
            suspendWrites()
            return false
        }
        // Bounded: each pass either makes progress or stops at EAGAIN.
        for _ in 0..<1024 {
            let remaining = sendRemaining
            let outcome = Errno.call("send") { Glibc.send(fd, cursor, remaining, Socket.noSignal) }
            switch outcome {
            case .success(let count):
                statistics.bytesSent += count
                sendRemaining -= count
                cursor += count
                sendCursor = cursor
                if sendRemaining == 0 {
                    sendCursor = nil
                    suspendWrites()
                    if notify {
                        delegate?.transportDidSend()
                    }
                    return true
                }
                statistics.partialSends += 1
            case .retry:
                // The socket buffer is full: wait for the write source.
                if writeSuspended {
                    writeSuspended = false
                    writeSource.resume()
                }
                return false
            case .failure(let error):
                suspendWrites()
                fail(error)
                return false
            }
        }
        if writeSuspended {
            writeSuspended = false
            writeSource.resume()
        }
        return false
    }

    private func suspendWrites() {
        if !writeSuspended, !closing {
            writeSuspended = true
            writeSource.suspend()
        }
    }

    private func readable() {
        guard !closing, !stopped, receiving else { return }
        let buffer = receiveBuffer
        let outcome = Errno.call("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, 0) }
        switch outcome {
        case .success(0):
            sawEOF = true
            pauseReceiving()
            delegate?.transportDidReachEOF()
        case .success(let count):
            statistics.receives += 1
            statistics.bytesReceived += count
            delegate?.transportDidReceive(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count))
        case .retry:
            break
        case .failure(let error):
            pauseReceiving()
            fail(error)
        }
    }

    private func fail(_ error: SalvoIOError) {
        guard !stopped else { return }
        stopped = true
        delegate?.transportDidFail(error)
    }

    private func sourceCancelled() {
        pendingCancels -= 1
        guard pendingCancels == 0 else { return }
        _ = Glibc.close(fd)
        let delegate = self.delegate
        self.delegate = nil
        delegate?.transportDidClose()
    }
}
