import Dispatch
import SalvoProxy

#if canImport(Glibc)
import Glibc
#endif

/// The tunnel through a proxy on a freshly connected, non-blocking socket, before its TLS handshake: carries out
/// `ProxyHandshake` (the exchange is that value's; this only writes and reads), a read source for the answers and a
/// timer for a proxy that falls silent, whichever ends first wins. On success the descriptor is handed on as it is,
/// so the connection after it (TLS, io_uring or sockets) is exactly a direct one's. Confined to `queue`.
final class PendingTunnel: @unchecked Sendable {
    let fd: Int32
    let queue: DispatchQueue
    private var handshake: ProxyHandshake
    private var completion: (@Sendable (Result<Int32, SalvoIOError>) -> Void)?
    private var source: DispatchSourceRead?
    private var timer: DispatchSourceTimer?
    private let timeout: Duration

    init(
        fd: Int32,
        handshake: ProxyHandshake,
        timeout: Duration,
        queue: DispatchQueue,
        completion: @escaping @Sendable (Result<Int32, SalvoIOError>) -> Void
    ) {
        self.fd = fd
        self.handshake = handshake
        self.timeout = timeout
        self.queue = queue
        self.completion = completion
    }

    func start() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        let source = DispatchSource.makeReadSource(fileDescriptor: self.fd, queue: self.queue)
        source.setEventHandler { self.readable() }
        let timer = DispatchSource.makeTimerSource(queue: self.queue)
        timer.schedule(deadline: .now() + self.timeout.dispatchInterval)
        timer.setEventHandler {
            let failure = self.handshake.timedOut(after: "\(self.timeout)")
            self.finish(.failure(Self.error(failure)))
        }
        self.source = source
        self.timer = timer
        source.resume()
        timer.resume()
        self.write(self.handshake.start())
    }

    /// Writes one of the exchange's messages (a few hundred bytes at most, to a socket with nothing else queued).
    private func write(_ bytes: [UInt8]) {
        let written = bytes.withUnsafeBytes { raw in
            Errno.call("send") { Glibc.send(self.fd, raw.baseAddress, raw.count, Socket.noSignal) }
        }
        switch written {
        case .success(let count) where count == bytes.count:
            break
        case .failure(let error):
            self.finish(.failure(SalvoIOError(.connectionReset, "\(self.who): \(error.message)", errno: error.errno)))
        default:
            self.finish(.failure(SalvoIOError(.connectionReset, "\(self.who): the request did not fit the socket")))
        }
    }

    private var who: String { "the proxy \(self.handshake.proxy)" }

    private func readable() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let outcome = buffer.withUnsafeMutableBytes { raw in
            Errno.call("recv") { Glibc.recv(self.fd, raw.baseAddress, raw.count, 0) }
        }
        let step: ProxyHandshake.Step
        switch outcome {
        case .retry:
            return
        case .failure(let error):
            self.finish(.failure(SalvoIOError(error.code, "\(self.who): \(error.message)", errno: error.errno)))
            return
        case .success(let count):
            step = self.handshake.receive(buffer.prefix(count))
        }
        switch step {
        case .read:
            break
        case .write(let bytes):
            self.write(bytes)
        case .failed(let failure):
            self.finish(.failure(Self.error(failure)))
        case .open(let leftover):
            // The client speaks first in TLS: a proxy that sends the gateway's bytes before the ClientHello is not
            // a tunnel.
            guard leftover.isEmpty else {
                self.finish(
                    .failure(
                        SalvoIOError(.proxyRefused, "\(self.who) sent bytes of its own after opening the tunnel")
                    )
                )
                return
            }
            self.finish(.success(self.fd))
        }
    }

    /// The error of a failed tunnel: a refusal no retry heals is `.proxyRefused`; a close or a silence is the
    /// reachability a direct connection's would be.
    static func error(_ failure: ProxyFailure) -> SalvoIOError {
        switch failure.kind {
        case .closed: SalvoIOError(.connectionClosed, failure.message)
        case .timeout: SalvoIOError(.timedOut, failure.message)
        case .unreachable: SalvoIOError(.connectionRefused, failure.message)
        default: SalvoIOError(.proxyRefused, failure.message)
        }
    }

    private func finish(_ result: Result<Int32, SalvoIOError>) {
        guard let completion = self.completion else { return }
        self.completion = nil
        self.timer?.cancel()
        self.timer = nil
        let fd = self.fd
        // The descriptor is handed on, or closed, only after the read source stopped watching it.
        self.source?.setCancelHandler {
            if case .failure = result { _ = Glibc.close(fd) }
            completion(result)
        }
        self.source?.cancel()
        self.source = nil
    }
}
