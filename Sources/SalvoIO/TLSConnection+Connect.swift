import Dispatch
import SalvoProxy

#if canImport(Glibc)
import Glibc
#endif

extension TLSConnection {
    /// Connects to `host:port` over TCP (non-blocking, `options.connectTimeout`), then runs the TLS
    /// handshake (`options.handshakeTimeout`) as a client.
    ///
    /// The server's certificate is checked against `serverName` (default: `host`) — an IP address or a
    /// host name (resolved off the queue; `options.addressChoice` picks one of its addresses). A session cached by an earlier connection to the same `host:port` is offered for
    /// resumption. Must be called on `context.queue`; `completion` runs there, with the open connection
    /// or an error saying what failed. Set the connection's callbacks inside `completion`.
    ///
    /// With TLS 1.3 the server checks our client certificate after our side of the handshake finished, so
    /// a refused certificate may show up as `onClose` with an error coded `.handshakeRefused` just after
    /// a successful `completion` (with TLS 1.2 it fails `completion` itself).
    public static func connect(
        host: String,
        port: Int,
        serverName: String? = nil,
        tls: TLSContext,
        context: IOContext,
        options: ConnectionOptions = ConnectionOptions(),
        completion: @escaping (Result<TLSConnection, SalvoIOError>) -> Void
    ) {
        dispatchPrecondition(condition: .onQueue(context.queue))
        // Runs on context.queue only (every path below calls back there).
        let box = UncheckedSendable(completion)
        // Through a proxy the TCP connection is the proxy's, and the gateway's name is the proxy's to resolve.
        let (dialHost, dialPort) = options.proxy.map { ($0.host, $0.port) } ?? (host, port)
        if let address = Socket.Address(numericHost: dialHost, port: dialPort) {
            connect(
                address: address,
                host: host,
                port: port,
                serverName: serverName,
                tls: tls,
                context: context,
                options: options,
                completion: box
            )
            return
        }
        // A host name: getaddrinfo blocks, so it runs off the owner's queue and hops back with the answer.
        DispatchQueue.global().async {
            let resolved = Result {
                try Socket.Address.resolve(host: dialHost, port: dialPort, choice: options.addressChoice)
            }
            context.queue.async {
                switch resolved {
                case .success(let address):
                    connect(
                        address: address,
                        host: host,
                        port: port,
                        serverName: serverName,
                        tls: tls,
                        context: context,
                        options: options,
                        completion: box
                    )
                case .failure(let error):
                    box.value(.failure(Self.throughProxy(error as! SalvoIOError, options: options)))
                }
            }
        }
    }

    private static func connect(
        address: Socket.Address,
        host: String,
        port: Int,
        serverName: String?,
        tls: TLSContext,
        context: IOContext,
        options: ConnectionOptions,
        completion box: UncheckedSendable<(Result<TLSConnection, SalvoIOError>) -> Void>
    ) {
        @Sendable func handshake(fd: Int32) {
            let connection: TLSConnection
            do {
                connection = try TLSConnection(
                    fd: fd,
                    context: context,
                    tls: tls,
                    serverName: serverName ?? host,
                    peerKey: "\(host):\(port)",
                    options: options
                )
            } catch {
                _ = Glibc.close(fd)
                box.value(.failure(error as! SalvoIOError))
                return
            }
            connection.start(completion: box.value)
        }
        Socket.connect(
            to: address,
            timeout: options.connectTimeout,
            sendBufferSize: options.sendBufferSize,
            queue: context.queue
        ) { result in
            switch result {
            case .failure(let error):
                box.value(.failure(Self.throughProxy(error, options: options)))
            case .success(let fd):
                guard let proxy = options.proxy else {
                    handshake(fd: fd)
                    return
                }
                PendingTunnel(
                    fd: fd,
                    handshake: ProxyHandshake(proxy: proxy, host: host, port: port),
                    timeout: options.connectTimeout,
                    queue: context.queue
                ) { tunnel in
                    switch tunnel {
                    case .success(let fd): handshake(fd: fd)
                    case .failure(let error): box.value(.failure(error))
                    }
                }.start()
            }
        }
    }

    /// A failed connect or name resolution of the proxy, said to be the proxy's.
    private static func throughProxy(_ error: SalvoIOError, options: ConnectionOptions) -> SalvoIOError {
        guard let proxy = options.proxy else { return error }
        var error = error
        error.message = "the proxy \(proxy) cannot be reached: \(error.message)"
        return error
    }
}
