import Dispatch
import SalvoIO

#if canImport(Glibc)
import Glibc
#endif

/// Accepts TCP connections and runs the server side of the TLS handshake on each, with SalvoIO's transports:
/// the TLS peer of SalvoIO's tests and of the transport benchmark's sink.
///
/// Accepted connections live on `context.queue`; `onConnection` runs there with each connection after
/// its handshake, or with the handshake's error (a missing or untrusted client certificate, say).
/// `@unchecked Sendable`: all mutable state is confined to `context.queue`.
public final class TLSListener: @unchecked Sendable {
    /// The bound port (useful with port 0).
    public let port: Int
    private let fd: Int32
    private let context: IOContext
    private let tls: TLSContext
    private let options: ConnectionOptions
    private let source: DispatchSourceRead
    private let onConnection: (Result<TLSConnection, SalvoIOError>) -> Void
    private var closed = false

    /// Listens on `host:port` (numeric address; port 0 picks a free port) and starts accepting.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: TLSContext,
        context: IOContext,
        options: ConnectionOptions = ConnectionOptions(),
        onConnection: @escaping (Result<TLSConnection, SalvoIOError>) -> Void
    ) throws {
        guard tls.role == .server else {
            throw SalvoIOError(.invalidConfiguration, "a TLSListener needs a server TLSContext")
        }
        let (fd, bound) = try Socket.listen(host: host, port: port)
        self.fd = fd
        self.port = bound
        self.context = context
        self.tls = tls
        self.options = options
        self.onConnection = onConnection
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: context.queue)
        source.setEventHandler { [weak self] in self?.acceptPending() }
        source.setCancelHandler { _ = Glibc.close(fd) }
        source.resume()
    }

    deinit {
        if !closed {
            source.cancel()
        }
    }

    /// Stops accepting; connections already accepted are not affected.
    public func close() {
        dispatchPrecondition(condition: .onQueue(context.queue))
        guard !closed else { return }
        closed = true
        source.cancel()
    }

    private func acceptPending() {
        guard !closed else { return }
        // Bounded per wake-up; the read source fires again while the backlog is not empty.
        for _ in 0..<64 {
            switch Socket.accept(fd) {
            case .success(let accepted):
                let client = Int32(accepted)
                do {
                    let connection = try TLSConnection(
                        fd: client,
                        context: context,
                        tls: tls,
                        serverName: nil,
                        peerKey: nil,
                        options: options
                    )
                    connection.start(completion: onConnection)
                } catch {
                    _ = Glibc.close(client)
                    onConnection(.failure(error as! SalvoIOError))
                }
            case .retry:
                return
            case .failure(let error):
                onConnection(.failure(error))
                return
            }
        }
    }
}
