import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// One non-blocking connect in progress: a write source for completion and a timer for the timeout,
/// whichever fires first wins. Confined to `queue`.
final class PendingConnect: @unchecked Sendable {
    let fd: Int32
    let queue: DispatchQueue
    var completion: (@Sendable (Result<Int32, SalvoIOError>) -> Void)?
    var source: DispatchSourceWrite?
    var timer: DispatchSourceTimer?

    init(fd: Int32, queue: DispatchQueue, completion: @escaping @Sendable (Result<Int32, SalvoIOError>) -> Void) {
        self.fd = fd
        self.queue = queue
        self.completion = completion
    }

    func start(timeout: Duration) {
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { self.writable() }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        timer.schedule(deadline: .now() + .nanoseconds(Int(max(0, nanoseconds))))
        timer.setEventHandler { self.timedOut() }
        self.source = source
        self.timer = timer
        source.resume()
        timer.resume()
    }

    private func writable() {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        if error == 0 {
            finish(.success(fd), closeSocket: false)
        } else {
            finish(.failure(Errno.error("connect", error)), closeSocket: true)
        }
    }

    private func timedOut() {
        finish(
            .failure(SalvoIOError(.timedOut, "connect did not finish in time; is the host reachable?")),
            closeSocket: true
        )
    }

    private func finish(_ result: Result<Int32, SalvoIOError>, closeSocket: Bool) {
        guard let completion else { return }
        self.completion = nil
        // Cancel both sources and let their handlers (which hold self) go; the descriptor is handed over
        // or closed only after the write source stopped watching it.
        timer?.cancel()
        timer = nil
        let fd = self.fd
        source?.setCancelHandler {
            if closeSocket {
                _ = Glibc.close(fd)
            }
            completion(result)
        }
        source?.cancel()
        source = nil
    }
}
