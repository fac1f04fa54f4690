import Dispatch

#if canImport(Glibc)
import Glibc
#endif

extension TLSConnection {
    /// Connects to `host:port` over TCP (non-blocking, `options.connectTimeout`), then runs the TLS
    /// handshake (`options.handshakeTimeout`) as a client.
    ///
    /// The server's certificate is checked against `serverName` (default: `host`) — an IP address or a
    /// host name. A session cached by an earlier connection to the same `host:port` is offered for
    /// resumption. Must be called on `context.queue`; `completion` runs there, with the open connection
    /// or an error saying what failed. Set the connection's callbacks inside `completion`.
    public static func connect(
        host: String, port: Int, serverName: String? = nil, tls: TLSContext, context: IOContext,
        options: ConnectionOptions = ConnectionOptions(),
        completion: @escaping (Result<TLSConnection, SalvoIOError>) -> Void
    ) {
        dispatchPrecondition(condition: .onQueue(context.queue))
        let address: Socket.Address
        do {
            address = try Socket.Address.resolve(host: host, port: port)
        } catch {
            completion(.failure(error as! SalvoIOError))
            return
        }
        // Runs on context.queue only (Socket.connect calls back there).
        let box = UncheckedSendable(completion)
        Socket.connect(to: address, timeout: options.connectTimeout, sendBufferSize: options.sendBufferSize,
                       queue: context.queue) { result in
            switch result {
            case .failure(let error):
                box.value(.failure(error))
            case .success(let fd):
                let connection: TLSConnection
                do {
                    connection = try TLSConnection(
                        fd: fd, context: context, tls: tls, serverName: serverName ?? host,
                        peerKey: "\(host):\(port)", options: options)
                } catch {
                    _ = Glibc.close(fd)
                    box.value(.failure(error as! SalvoIOError))
                    return
                }
                connection.start(completion: box.value)
            }
        }
    }
}
