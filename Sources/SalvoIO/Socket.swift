import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Small socket helpers shared by both transports: address parsing, non-blocking connect with a
/// timeout, listening, and socket options. Descriptors are plain `Int32`s owned by the caller.
package enum Socket {
    /// `MSG_NOSIGNAL`: a send to a reset peer returns EPIPE instead of raising SIGPIPE. Glibc's Swift
    /// overlay does not export the constant, so it is spelled out (Linux value).
    static let noSignal: Int32 = 0x4000

    /// An IPv4 or IPv6 socket address.
    struct Address: @unchecked Sendable {  // a plain value: C socket address bytes
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        var family: Int32 { Int32(storage.ss_family) }

        /// Parses a numeric IPv4 or IPv6 address; nil for host names.
        init?(numericHost host: String, port: Int) {
            var v4 = sockaddr_in()
            var v6 = sockaddr_in6()
            if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
                v4.sin_family = sa_family_t(AF_INET)
                v4.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
                withUnsafeBytes(of: &v4) { raw in
                    withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) }
                }
                length = socklen_t(MemoryLayout<sockaddr_in>.size)
            } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
                v6.sin6_family = sa_family_t(AF_INET6)
                v6.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
                withUnsafeBytes(of: &v6) { raw in
                    withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) }
                }
                length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            } else {
                return nil
            }
        }

        /// Resolves `host` (numeric, or a name through getaddrinfo, which may block briefly on DNS) and picks
        /// address number `choice` modulo their count.
        static func resolve(host: String, port: Int, choice: Int = 0) throws -> Address {
            let all = try resolveAll(host: host, port: port)
            return all[Int(UInt(bitPattern: choice) % UInt(all.count))]
        }

        /// Every address `host` resolves to for TCP, in the resolver's order, each once (at least one).
        static func resolveAll(host: String, port: Int) throws -> [Address] {
            if let address = Address(numericHost: host, port: port) {
                return [address]
            }
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let rc = getaddrinfo(host, String(port), &hints, &list)
            guard rc == 0, let first = list else {
                throw SalvoIOError(
                    .nameResolution,
                    "cannot resolve host \(host): \(String(cString: gai_strerror(rc)))"
                )
            }
            defer { freeaddrinfo(list) }
            var addresses: [Address] = []
            var seen: Set<[UInt8]> = []
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let current = entry {
                entry = current.pointee.ai_next
                let length = Int(current.pointee.ai_addrlen)
                guard let pointer = current.pointee.ai_addr, length <= MemoryLayout<sockaddr_storage>.size else {
                    continue
                }
                let bytes = [UInt8](UnsafeRawBufferPointer(start: pointer, count: length))
                guard seen.insert(bytes).inserted else { continue }
                var address = Address(numericHost: "0.0.0.0", port: port)!
                withUnsafeMutableBytes(of: &address.storage) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: length))
                }
                address.length = current.pointee.ai_addrlen
                addresses.append(address)
            }
            guard !addresses.isEmpty else {
                throw SalvoIOError(.nameResolution, "cannot resolve host \(host): no address for TCP")
            }
            return addresses
        }

        func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
            withUnsafeBytes(of: storage) { raw in
                body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
            }
        }
    }

    /// A new non-blocking, close-on-exec TCP socket with `TCP_NODELAY` (batches are already large).
    static func makeTCP(family: Int32) throws -> Int32 {
        let fd = try Errno.callOrThrow("socket") {
            Int(
                Glibc.socket(
                    family,
                    Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                        | Int32(SOCK_CLOEXEC.rawValue),
                    0
                )
            )
        }
        setOption(Int32(fd), Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        return Int32(fd)
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes the peer's TCP has acknowledged on this socket since it connected (Linux's `tcpi_bytes_acked`, a
    /// counter the kernel keeps after a reset too, unlike the send queue `SIOCOUTQ` measures, which a reset
    /// empties); nil when the kernel does not say (before Linux 4.1).
    static func bytesAcknowledged(_ fd: Int32) -> Int? {
        // Glibc's `struct tcp_info` ends before this field, so the kernel's layout (linux/tcp.h) is read as bytes:
        // `tcpi_bytes_acked` is the 64-bit counter at offset 120, after 8 one-byte fields, 24 32-bit fields and
        // the two 64-bit pacing rates.
        withUnsafeTemporaryAllocation(byteCount: 256, alignment: 8) { buffer -> Int? in
            var length = socklen_t(buffer.count)
            guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, buffer.baseAddress, &length) == 0, length >= 128 else {
                return nil
            }
            return Int(clamping: buffer.load(fromByteOffset: 120, as: UInt64.self))
        }
    }

    /// Makes `close` send a reset instead of a FIN.
    static func setLingerZero(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Starts a non-blocking connect and calls `completion` on `queue` with the connected descriptor, or
    /// an error (refused, unreachable, `.timedOut` after `timeout`). No thread waits: a write source
    /// reports the end of the connect and a timer the timeout.
    static func connect(
        to address: Address,
        timeout: Duration,
        sendBufferSize: Int?,
        queue: DispatchQueue,
        completion: @escaping @Sendable (Result<Int32, SalvoIOError>) -> Void
    ) {
        dispatchPrecondition(condition: .onQueue(queue))
        let fd: Int32
        do {
            fd = try makeTCP(family: address.family)
        } catch {
            completion(.failure(error as! SalvoIOError))
            return
        }
        if let size = sendBufferSize {
            setOption(fd, SOL_SOCKET, SO_SNDBUF, Int32(size))
        }
        let outcome = Errno.call("connect") {
            Int(address.withSockAddr { Glibc.connect(fd, $0, $1) })
        }
        switch outcome {
        case .success:
            completion(.success(fd))
            return
        case .failure(let error) where error.errno != EINPROGRESS:
            _ = Glibc.close(fd)
            completion(.failure(error))
            return
        default:
            break
        }
        let pending = PendingConnect(fd: fd, queue: queue, completion: completion)
        pending.start(timeout: timeout)
    }

    /// A listening TCP socket bound to `host:port` (port 0 picks a free one); returns the descriptor and
    /// the bound port.
    package static func listen(host: String, port: Int, backlog: Int32 = 128) throws -> (fd: Int32, port: Int) {
        guard let address = Address(numericHost: host, port: port) else {
            throw SalvoIOError(.invalidConfiguration, "listen address must be numeric, got \(host)")
        }
        let fd = try makeTCP(family: address.family)
        setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        do {
            _ = try Errno.callOrThrow("bind") { Int(address.withSockAddr { Glibc.bind(fd, $0, $1) }) }
            _ = try Errno.callOrThrow("listen") { Int(Glibc.listen(fd, backlog)) }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let boundPort = withUnsafeBytes(of: bound) { raw -> UInt16 in
            // sin_port and sin6_port are both at offset 2.
            UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
        }
        return (fd, Int(boundPort))
    }

    /// Accepts one pending connection on the listening socket `fd`: close-on-exec and `TCP_NODELAY` set, or
    /// `.retry` when none is pending.
    package static func accept(_ fd: Int32) -> Errno.Outcome {
        // accept4 is hidden behind _GNU_SOURCE in Glibc's overlay: accept, then set close-on-exec.
        let outcome = Errno.call("accept") { Int(Glibc.accept(fd, nil, nil)) }
        if case .success(let accepted) = outcome {
            let client = Int32(accepted)
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            setOption(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        }
        return outcome
    }
}
