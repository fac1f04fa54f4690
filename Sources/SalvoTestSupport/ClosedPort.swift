#if canImport(Glibc)
import Glibc
#endif

/// A loopback port bound and never listened on, held until `close()`: a connect to it is refused, and no other test's
/// server can take it meanwhile (a port a stopped server freed may be another's by the time of the connect).
public final class ClosedPort: @unchecked Sendable {
    public let port: Int
    private var descriptor: Int32

    public init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(descriptor, raw, length) == 0 && getsockname(descriptor, raw, &length) == 0
            }
        }
        guard descriptor >= 0, bound else {
            if descriptor >= 0 { Glibc.close(descriptor) }
            throw ClosedPortError()
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() {
        if self.descriptor >= 0 { Glibc.close(self.descriptor) }
        self.descriptor = -1
    }

    deinit { self.close() }
}

public struct ClosedPortError: Error {}
