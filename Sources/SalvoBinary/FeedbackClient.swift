import APNSWire
import Dispatch
import NIOCore
internal import SalvoIO
import SalvoProxy
import SalvoRows

/// Reads the feedback service once: connects with the client certificate (the same mutual TLS as the binary
/// gateway), sends nothing, decodes every tuple until the service closes, and gives up after `timeout`.
///
/// The driver is thin: `FeedbackDecoder` makes every decision about bytes. Confined to its own serial queue.
public enum FeedbackClient {
    /// Where and how to read.
    public struct Configuration: Sendable {
        /// `feedback.push.apple.com:2196`, `GatewayAddress.production(.feedback)`, or a simulator.
        public var gateway: GatewayAddress
        /// The name the service's certificate must carry (default: the host).
        public var serverName: String?
        public var credentials: GatewayCredentials
        /// The most the whole read may take, connect and handshake included.
        public var timeout: Duration
        /// nil: io_uring where the kernel allows it, else sockets.
        public var transport: BinaryTransport?
        /// The proxy the connection goes through; nil for a direct connection.
        public var proxy: ProxyConfiguration?

        public init(
            gateway: GatewayAddress,
            serverName: String? = nil,
            credentials: GatewayCredentials,
            timeout: Duration = .seconds(60),
            transport: BinaryTransport? = nil
        ) {
            self.gateway = gateway
            self.serverName = serverName
            self.credentials = credentials
            self.timeout = timeout
            self.transport = transport
        }
    }

    /// Reads every tuple the service sends.
    ///
    /// - Throws: `JobError(.credentials)` for credentials that do not load or a handshake the service refuses,
    ///   `JobError(.unreachable)` for a service that cannot be reached, or that stays silent past the timeout
    ///   before it sent anything. Problems after data started to arrive are in the result instead.
    public static func read(_ configuration: Configuration) async throws(JobError) -> FeedbackRead {
        let tls = try configuration.credentials.makeContext()
        let queue = DispatchQueue(label: "salvo.feedback")
        let context: IOContext
        do {
            context = try IOContext(queue: queue, transport: configuration.transport?.kind)
        } catch {
            throw JobError(.unreachable, "\(error)")
        }
        let result: Result<FeedbackRead, JobError> = await withCheckedContinuation { continuation in
            queue.async {
                FeedbackReader(configuration: configuration, tls: tls, context: context) {
                    continuation.resume(returning: $0)
                }.start()
            }
        }
        return try result.get()
    }
}

/// One read's state, confined to `context.queue`.
private final class FeedbackReader: @unchecked Sendable {
    private let configuration: FeedbackClient.Configuration
    private let tls: TLSContext
    private let context: IOContext
    private var completion: ((Result<FeedbackRead, JobError>) -> Void)?
    private var decoder = FeedbackDecoder()
    private var read = FeedbackRead()
    private var tuples = 0
    private var received = 0
    private var connection: TLSConnection?
    private var timer: DispatchSourceTimer?

    init(
        configuration: FeedbackClient.Configuration,
        tls: TLSContext,
        context: IOContext,
        completion: @escaping (Result<FeedbackRead, JobError>) -> Void
    ) {
        self.configuration = configuration
        self.tls = tls
        self.context = context
        self.completion = completion
    }

    private var address: String { self.configuration.gateway.description }

    func start() {
        dispatchPrecondition(condition: .onQueue(self.context.queue))
        let timer = DispatchSource.makeTimerSource(queue: self.context.queue)
        let (seconds, attoseconds) = self.configuration.timeout.components
        timer.schedule(deadline: .now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
        timer.setEventHandler { [self] in self.timedOut() }
        timer.resume()
        self.timer = timer

        var options = ConnectionOptions()
        options.connectTimeout = self.configuration.timeout
        options.handshakeTimeout = self.configuration.timeout
        options.proxy = self.configuration.proxy
        TLSConnection.connect(
            host: self.configuration.gateway.host,
            port: self.configuration.gateway.port,
            serverName: self.configuration.serverName,
            tls: self.tls,
            context: self.context,
            options: options
        ) { [self] result in
            switch result {
            case .success(let connection):
                guard self.completion != nil else { return connection.abort() }
                self.connection = connection
                connection.onPlaintext = { [self] bytes in self.received(bytes) }
                connection.onClose = { [self] end in self.closed(end) }
            case .failure(let error):
                self.finish(.failure(Self.jobError(error, address: self.address)))
            }
        }
    }

    private func received(_ bytes: ByteBuffer) {
        self.received += bytes.readableBytes
        self.decoder.feed(bytes) { tuple in
            self.tuples += 1
            self.read.add(tuple, index: self.tuples)
        }
    }

    private func closed(_ end: ConnectionEnd) {
        self.connection = nil
        if let error = end.error, end.reason != .peerClosed {
            if self.received == 0 {
                return self.finish(.failure(Self.jobError(error, address: self.address)))
            }
            self.read.problems.append(
                "the connection to \(self.address) ended with an error after \(self.tuples) tuple(s): \(error.message)"
            )
        }
        do {
            try self.decoder.finish()
        } catch {
            self.read.problems.append("\(error) (after \(self.tuples) whole tuple(s))")
        }
        self.finish(.success(self.read))
    }

    private func timedOut() {
        guard self.completion != nil else { return }
        let seconds = self.configuration.timeout.components.seconds
        if self.received == 0 {
            self.connection?.abort()
            self.finish(
                .failure(
                    JobError(
                        .unreachable,
                        "\(self.address) sent nothing within \(seconds) s; check the address, or raise --timeout"
                    )
                )
            )
            return
        }
        self.read.problems.append(
            "\(self.address) did not close within \(seconds) s: kept the \(self.tuples) whole tuple(s) read"
        )
        if self.decoder.pendingBytes > 0 {
            self.read.problems.append("\(self.decoder.pendingBytes) byte(s) of an unfinished tuple were dropped")
        }
        let read = self.read
        self.finish(.success(read))
        self.connection?.abort()
    }

    private func finish(_ result: Result<FeedbackRead, JobError>) {
        guard let completion = self.completion else { return }
        self.completion = nil
        self.timer?.cancel()
        self.timer = nil
        completion(result)
    }

    private static func jobError(_ error: SalvoIOError, address: String) -> JobError {
        switch error.code {
        case .connectionRefused, .timedOut, .systemCall, .connectionReset, .connectionClosed, .proxyRefused:
            JobError(.unreachable, "\(address): \(error.message)")
        default:
            JobError(.credentials, "\(address): \(error.message)")
        }
    }
}
