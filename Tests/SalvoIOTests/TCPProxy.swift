import Foundation
import Glibc

/// A loopback TCP proxy on its own thread, for endings a TLS peer would not produce on its own: on
/// `cutClientSide()` it half-closes towards the client (FIN, no TLS close_notify). Runs at most
/// `lifetime`; every loop is bounded.
final class TCPProxy: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let target: Int
    private let lock = NSLock()
    private var cut = false
    private let finished = Waiter<Void>()

    init(forwardingTo target: Int, lifetime: TimeInterval = 5) throws {
        self.target = target
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = listener
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 && listen(fd, 1) == 0
            }
        }
        guard ok else { throw POSIXError(.EADDRINUSE) }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in run(until: Date() + lifetime) }
        thread.start()
    }

    /// Sends FIN to the client from now on, without forwarding anything more to it.
    func cutClientSide() {
        lock.lock()
        cut = true
        lock.unlock()
    }

    /// Waits (bounded) for the proxy thread to end.
    func wait() async {
        _ = await finished.wait(seconds: 10)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    private func run(until deadline: Date) {
        defer {
            close(listener)
            finished.fulfill(())
        }
        var pending = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&pending, 1, 5000) == 1 else { return }
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        defer { close(client) }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(server) }
        var address = Self.loopback(port: target)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var clientCut = false
        // Bounded by the deadline: 20 ms polls.
        while Date() < deadline {
            lock.lock()
            let cutNow = cut
            lock.unlock()
            if cutNow, !clientCut {
                clientCut = true
                shutdown(client, Int32(SHUT_WR))
            }
            var fds = [
                pollfd(fd: client, events: Int16(POLLIN), revents: 0),
                pollfd(fd: server, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&fds, 2, 20) >= 0 else { return }
            if fds[0].revents != 0 {
                let count = read(client, &buffer, buffer.count)
                if count <= 0 { return }
                _ = write(server, buffer, count)
            }
            if fds[1].revents != 0 {
                let count = read(server, &buffer, buffer.count)
                if count <= 0 { return }
                if !clientCut {
                    _ = write(client, buffer, count)
                }
            }
        }
    }
}
