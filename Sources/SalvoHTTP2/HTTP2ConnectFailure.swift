import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

/// Connection failures that retrying cannot heal when no connection of the job has worked yet: a name that does
/// not resolve, nothing listening, a peer that does not speak TLS or HTTP/2, a certificate either side refuses.
/// The job stops at once with the cause rather than retry for a minute.
enum HTTP2ConnectFailure {
    /// Why a failed connect cannot heal, or nil when it may (a timeout, a reset).
    static func hopeless(connectError error: any Error) -> String? {
        if let error = error as? NIOConnectionError {
            if error.connectionErrors.isEmpty {
                let cause = error.dnsAError ?? error.dnsAAAAError
                return "the name \(error.host) does not resolve" + (cause.map { " (\($0))" } ?? "")
            }
            let refused = error.connectionErrors.allSatisfy { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
            if refused { return "nothing listens on \(error.host):\(error.port) (connection refused)" }
            return nil
        }
        if error is SocketAddressError { return "the name does not resolve (\(error))" }
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED { return "nothing listens there (\(error))" }
        return nil
    }

    /// Why an error on a connection that never became ready cannot heal, or nil: TLS failed (the peer does not
    /// speak TLS, its certificate does not verify, or it refused ours).
    static func hopeless(connectionError error: any Error) -> String? {
        if error is NIOSSLError || error is BoringSSLError {
            return "the TLS handshake failed: \(error) (is it an HTTPS port, the right CA, a valid client certificate?)"
        }
        return nil
    }
}
