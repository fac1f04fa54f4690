import Dispatch
import NIOCore
import SalvoIO

/// A TLS gateway on 127.0.0.1 that misbehaves the way a hostile network does, for tests of bounded waits: one that
/// reads every byte and never answers (the barrier included), one that answers junk and closes.
///
/// Built on `TLSListener` (SalvoIO's server role). `@unchecked Sendable`: the connections and counters are confined
/// to `context.queue`, and read through `sync` on it.
public final class MisbehavingGateway: @unchecked Sendable {
    /// What the gateway does with a connection after the handshake.
    public enum Behavior: Sendable {
        /// Reads (so TCP acknowledges every byte) and never says anything.
        case silent
        /// Answers these bytes as soon as the client writes, then closes.
        case junk([UInt8])
    }

    public private(set) var port = 0
    private let context: IOContext
    private var listener: TLSListener?
    private var connections: [TLSConnection] = []
    private var accepted = 0
    private var bytesRead = 0

    /// Listens on a free port of 127.0.0.1 with the server certificate of `paths`, asking for a client certificate
    /// signed by its CA.
    public init(_ behavior: Behavior, paths: CertificateFactory.Paths) throws {
        let tls = try TLSContext(
            configuration: .server(
                credentials: .pem(certificateChainFile: paths.server, privateKeyFile: paths.serverKey),
                clientCAFile: paths.ca
            )
        )
        let context = try IOContext(queue: DispatchQueue(label: "salvo.test.misbehaving-gateway"), transport: .socket)
        self.context = context
        try context.queue.sync {
            let made = try TLSListener(tls: tls, context: context) { [weak self] result in
                guard let self, case .success(let connection) = result else { return }
                self.accepted += 1
                self.connections.append(connection)
                connection.onPlaintext = { [weak self, weak connection] bytes in
                    guard let self, let connection else { return }
                    self.bytesRead += bytes.readableBytes
                    if case .junk(let answer) = behavior {
                        var buffer = ByteBuffer()
                        buffer.writeBytes(answer)
                        try? connection.write(buffer)
                        connection.close()
                    }
                }
                connection.onClose = { [weak self, weak connection] _ in
                    self?.connections.removeAll { $0 === connection }
                }
            }
            self.listener = made
            self.port = made.port
        }
    }

    /// Connections accepted (handshake done) so far.
    public var acceptedConnections: Int { self.context.queue.sync { self.accepted } }

    /// Plaintext bytes read from every connection so far.
    public var plaintextBytesRead: Int { self.context.queue.sync { self.bytesRead } }

    /// Stops accepting and drops every connection.
    public func stop() {
        self.context.queue.sync {
            self.listener?.close()
            self.listener = nil
            for connection in self.connections { connection.abort() }
            self.connections = []
        }
    }
}
