/// Why a tunnel through a proxy could not be opened (or a proxy setting was refused): always says that it was the
/// proxy, never Apple, and never holds the proxy's password.
public struct ProxyFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A proxy URL, environment variable or password file that cannot be used.
        case configuration
        /// The proxy could not be reached (refused, unknown name, no TCP connect in time).
        case unreachable
        /// The proxy wants credentials, or refused the ones given (HTTP 407, SOCKS5 username/password refused).
        case authentication
        /// The proxy offered none of the SOCKS5 methods Salvo offered.
        case methodRefused
        /// The proxy refused to open the tunnel to the gateway (an HTTP status other than 2xx and 407, a SOCKS5 reply
        /// other than success).
        case refused
        /// The proxy answered something that is not the protocol.
        case protocolViolation
        /// The proxy closed the connection before the tunnel was open.
        case closed
        /// The proxy accepted the connection and then said nothing in time.
        case timeout
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { self.message }
}
