#if canImport(Glibc)
import Glibc
#endif

/// A plain, blocking TCP connection to a loopback port, made on the caller's thread: for a test that needs a
/// connection to exist before it goes on (a connection the server must count, a plain-text request), with no event
/// loop or task of its own that a busy machine could leave waiting.
public enum LoopbackSocket {
    /// A socket connected to 127.0.0.1:`port`, its descriptor the caller's to close; nil when the connect fails
    /// (`errno` says why).
    public static func connect(port: Int) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let failure = errno
            close(descriptor)
            errno = failure
            return nil
        }
        return descriptor
    }

    /// A socket bound to a free port of 127.0.0.1 (not listening yet), its descriptor the caller's to close, and the
    /// port; nil when it cannot be had.
    public static func bound() -> (descriptor: Int32, port: Int)? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(descriptor, raw, length) == 0 && getsockname(descriptor, raw, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            return nil
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}
