import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Spreads a job's connections over every address the gateway's name resolves to. NIO's own resolver hands every
/// connection getaddrinfo's answer in the same order, so every connection of a job would land on the first of
/// Apple's front ends; this one turns each family's list by `turn` (the connection slot's index, moved on by each
/// failed connect), so slot k starts at the k-th address and still tries the others after it (NIO's Happy
/// Eyeballs connects in the order given).
///
/// One resolver per connect, on the slot's event loop; like NIO's getaddrinfo resolver, it blocks that loop for the
/// lookup (a connect, not a request, pays for it).
final class RotatingResolver: Resolver, @unchecked Sendable {
    private let loop: any EventLoop
    private let turn: Int
    private var answer: Result<(v4: [SocketAddress], v6: [SocketAddress]), any Error>?

    init(loop: any EventLoop, turn: Int) {
        self.loop = loop
        self.turn = turn
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        self.loop.makeCompletedFuture(self.lookup(host: host, port: port).map { Self.rotated($0.v4, by: self.turn) })
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        self.loop.makeCompletedFuture(self.lookup(host: host, port: port).map { Self.rotated($0.v6, by: self.turn) })
    }

    func cancelQueries() {}

    /// `addresses` starting at `turn` (modulo their count), the ones before it after.
    static func rotated<Element>(_ addresses: [Element], by turn: Int) -> [Element] {
        guard addresses.count > 1 else { return addresses }
        let start = Int(UInt(bitPattern: turn) % UInt(addresses.count))
        return Array(addresses[start...] + addresses[..<start])
    }

    /// One getaddrinfo for both families (the A and AAAA queries share it).
    private func lookup(host: String, port: Int) -> Result<(v4: [SocketAddress], v6: [SocketAddress]), any Error> {
        if let answer = self.answer { return answer }
        let answer = Result(catching: { try Self.resolve(host: host, port: port) })
        self.answer = answer
        return answer
    }

    private static func resolve(host: String, port: Int) throws -> (v4: [SocketAddress], v6: [SocketAddress]) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw NameResolutionError(host: host, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var v4: [SocketAddress] = []
        var v6: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            entry = current.pointee.ai_next
            guard let pointer = current.pointee.ai_addr else { continue }
            switch Int32(pointer.pointee.sa_family) {
            case AF_INET:
                let address = pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                let value = SocketAddress(address, host: host)
                if !v4.contains(value) { v4.append(value) }
            case AF_INET6:
                let address = pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                let value = SocketAddress(address, host: host)
                if !v6.contains(value) { v6.append(value) }
            default:
                continue
            }
        }
        return (v4, v6)
    }
}

/// A gateway name getaddrinfo cannot resolve, with its reason.
struct NameResolutionError: Error, CustomStringConvertible {
    var host: String
    var reason: String

    var description: String { "cannot resolve \(self.host): \(self.reason)" }
}
