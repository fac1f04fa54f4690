import Dispatch
import SalvoProxy

/// Tunables of a `TLSConnection`. The defaults suit bulk sending of 64 KiB batches.
public struct ConnectionOptions: Sendable {
    /// Initial capacity of each of the two ciphertext buffers (one in flight, one filling). They grow
    /// only if a single write needs more, and are reused afterwards.
    public var ciphertextBufferCapacity: Int = 256 * 1024
    /// Size of the receive buffer lent to the kernel.
    public var receiveBufferSize: Int = 256 * 1024
    /// Plaintext is delivered to `onPlaintext` in chunks of at most this many bytes.
    public var plaintextChunkSize: Int = 64 * 1024
    /// `SO_SNDBUF` for client sockets, nil for the kernel's default.
    public var sendBufferSize: Int?
    /// How long the TCP connect may take.
    public var connectTimeout: Duration = .seconds(10)
    /// How long the TLS handshake may take.
    public var handshakeTimeout: Duration = .seconds(10)
    /// How long `close` waits for the peer's close_notify or EOF before closing anyway.
    public var closeTimeout: Duration = .seconds(2)
    /// Which of the addresses a host name resolves to (in the resolver's order, each once) to connect to: this
    /// number modulo their count. Connections that pass different numbers spread over the gateway's addresses.
    public var addressChoice = 0
    /// The proxy the TCP connection goes through: the tunnel is opened on the raw socket (`PendingTunnel`, within
    /// `connectTimeout` again) before the TLS handshake, so nothing after it changes. The gateway's name is then
    /// resolved by the proxy; nil for a direct connection.
    public var proxy: ProxyConfiguration?

    /// The defaults.
    public init() {}
}
