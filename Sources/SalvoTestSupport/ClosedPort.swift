#if canImport(Glibc)
import Glibc
#endif

/// A loopback port bound and never listened on, held until `close()`: a connect to it is refused, and no other test's
/// server can take it meanwhile (a port a stopped server freed may be another's by the time of the connect).
public final class ClosedPort: @unchecked Sendable {
    public let port: Int
    private var descriptor: Int32

    public init() throws {
        guard let (descriptor, port) = LoopbackSocket.bound() else { throw ClosedPortError() }
        self.descriptor = descriptor
        self.port = port
    }

    public func close() {
        if self.descriptor >= 0 { Glibc.close(self.descriptor) }
        self.descriptor = -1
    }

    /// The bound socket, given up to a server that listens on it from now on (the port stays the same, and was
    /// never free meanwhile); nil when it was closed or given up before.
    public func handOver() -> Int32? {
        guard self.descriptor >= 0 else { return nil }
        defer { self.descriptor = -1 }
        return self.descriptor
    }

    deinit { self.close() }
}

public struct ClosedPortError: Error {}

/// A loopback port that completes TCP connects (the kernel's backlog) and never reads or answers, held until
/// `close()`: a peer that accepts and falls silent.
public final class SilentPort: @unchecked Sendable {
    public let port: Int
    private var descriptor: Int32

    public init() throws {
        guard let (descriptor, port) = LoopbackSocket.bound() else { throw ClosedPortError() }
        guard listen(descriptor, 64) == 0 else {
            Glibc.close(descriptor)
            throw ClosedPortError()
        }
        self.descriptor = descriptor
        self.port = port
    }

    public func close() {
        if self.descriptor >= 0 { Glibc.close(self.descriptor) }
        self.descriptor = -1
    }

    deinit { self.close() }
}
