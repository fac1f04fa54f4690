import Dispatch
internal import SalvoIO
import SalvoProxy
import SalvoRows

/// Connects to a binary gateway with a job's credentials, completes the TLS handshake, and closes without sending
/// anything: whether a send could connect. Thin: `TLSConnection.connect` does the work, as for a job's shards.
///
/// With TLS 1.3 the gateway judges the client certificate after the client's side of the handshake finished, so a
/// refusal arrives as the connection's end just after it opened: the handshake counts as passed only when the
/// connection is still open `settle` later.
public enum GatewayHandshake {
    /// Connects, shakes hands, waits `settle`, closes.
    ///
    /// - Returns: a description of what was reached (`TLSv1.3 with 127.0.0.1:2195`).
    /// - Throws: `JobError(.credentials)` for credentials that do not load or a handshake either side refuses,
    ///   `JobError(.unreachable)` for a gateway that cannot be reached within `timeout`.
    public static func binary(
        gateway: GatewayAddress,
        serverName: String? = nil,
        credentials: GatewayCredentials,
        timeout: Duration = .seconds(10),
        settle: Duration = .milliseconds(300),
        transport: BinaryTransport? = .socket,
        proxy: ProxyConfiguration? = nil
    ) async throws(JobError) -> String {
        let tls = try credentials.makeContext()
        let queue = DispatchQueue(label: "salvo.handshake")
        let context: IOContext
        do {
            context = try IOContext(queue: queue, transport: transport?.kind)
        } catch {
            throw JobError(.unreachable, "\(error)")
        }
        let result: Result<String, JobError> = await withCheckedContinuation { continuation in
            queue.async {
                HandshakeProbe(gateway: gateway, settle: settle) { continuation.resume(returning: $0) }
                    .start(serverName: serverName, tls: tls, context: context, timeout: timeout, proxy: proxy)
            }
        }
        return try result.get()
    }

    fileprivate static func jobError(_ error: SalvoIOError, gateway: GatewayAddress) -> JobError {
        switch error.code {
        case .connectionRefused, .timedOut, .systemCall, .connectionReset, .connectionClosed, .proxyRefused:
            JobError(.unreachable, "\(gateway): \(error.message)")
        default:
            JobError(.credentials, "\(gateway): \(error.message)")
        }
    }
}

/// One handshake's state, confined to its `IOContext`'s queue.
private final class HandshakeProbe: @unchecked Sendable {
    private let gateway: GatewayAddress
    private let settle: Duration
    private var completion: ((Result<String, JobError>) -> Void)?

    init(gateway: GatewayAddress, settle: Duration, completion: @escaping (Result<String, JobError>) -> Void) {
        self.gateway = gateway
        self.settle = settle
        self.completion = completion
    }

    func start(serverName: String?, tls: TLSContext, context: IOContext, timeout: Duration, proxy: ProxyConfiguration?)
    {
        dispatchPrecondition(condition: .onQueue(context.queue))
        var options = ConnectionOptions()
        options.connectTimeout = timeout
        options.handshakeTimeout = timeout
        options.proxy = proxy
        let through = proxy.map { " through the proxy \($0) (reached, tunnel open)" } ?? ""
        TLSConnection.connect(
            host: self.gateway.host,
            port: self.gateway.port,
            serverName: serverName,
            tls: tls,
            context: context,
            options: options
        ) { [self] result in
            switch result {
            case .success(let connection):
                connection.onPlaintext = { _ in }
                connection.onClose = { [self] end in
                    let cause = end.error?.message ?? "closed by the gateway"
                    self.finish(
                        .failure(JobError(.credentials, "\(self.gateway): the gateway ended the connection: \(cause)"))
                    )
                }
                let (seconds, attoseconds) = self.settle.components
                let delay = DispatchTimeInterval.milliseconds(Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000))
                context.queue.asyncAfter(deadline: .now() + delay) { [self] in
                    guard self.completion != nil else { return }
                    self.finish(.success("TLS handshake with \(self.gateway)\(through) passed"))
                    connection.close()
                }
            case .failure(let error):
                self.finish(.failure(GatewayHandshake.jobError(error, gateway: self.gateway)))
            }
        }
    }

    private func finish(_ result: Result<String, JobError>) {
        guard let completion = self.completion else { return }
        self.completion = nil
        completion(result)
    }
}
