import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import SalvoRows

/// One of a job's connection places: keeps one connection open on its event loop while the job has work,
/// replaces it after GOAWAY or a close, and backs off (with the shared `ReconnectPolicy`) after failures.
///
/// Confined to `eventLoop`: every method runs there. `@unchecked Sendable` so the pool can hold it; no field is
/// touched off that loop.
final class HTTP2ConnectionSlot: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let configuration: HTTP2ClientConfiguration
    /// Opens each connection: proxy tunnel, TLS and its checks.
    private let factory: HTTP2ConnectionFactory
    private let job: HTTP2JobContext
    private var failures = 0
    /// The job's settled rows when this slot last saw them change, and when: the policy's backoff is cut to end at
    /// its `giveUpAfter` deadline. Giving up is the job's decision (`HTTP2JobContext.stall`), never a slot's.
    private var progressMark: (answered: Int, at: NIODeadline) = (0, .now())
    private var lastConnect: NIODeadline?
    private var channels: [ObjectIdentifier: any Channel] = [:]
    private var current: ObjectIdentifier?
    private var connecting = false
    private var stopped = false
    private var pendingConnect: Scheduled<Void>?
    /// Jitter for reconnect delays, and the seeds of this slot's connections.
    private var random: SplitMix64
    /// Which of the gateway's addresses this slot tries first (`RotatingResolver`): its index, moved on by each
    /// failed connect.
    private var addressTurn: Int

    init(
        index: Int,
        eventLoop: any EventLoop,
        random: SplitMix64,
        configuration: HTTP2ClientConfiguration,
        factory: HTTP2ConnectionFactory,
        job: HTTP2JobContext
    ) {
        self.eventLoop = eventLoop
        self.addressTurn = index
        self.random = random
        self.configuration = configuration
        self.factory = factory
        self.job = job
    }

    /// Opens the first connection.
    func start() {
        self.eventLoop.execute { self.connect() }
    }

    /// Closes every connection of this slot (TLS close_notify first); succeeds when they are closed.
    func stop() -> EventLoopFuture<Void> {
        self.eventLoop.flatSubmit {
            self.stopped = true
            self.pendingConnect?.cancel()
            let closes = self.channels.values.map { channel in
                channel.close().recover { _ in }
            }
            return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
        }
    }

    /// Closes the connections `stop` is still closing at once, without waiting for the server's close_notify: the
    /// socket is closed below TLS. Succeeds when they are closed.
    func cut() -> EventLoopFuture<Void> {
        self.eventLoop.flatSubmit {
            self.stopped = true
            self.pendingConnect?.cancel()
            let closes = self.channels.values.map { channel in
                // From the TLS handler's place, a close goes only to the handlers before it: the socket.
                if let tls = try? channel.pipeline.syncOperations.context(handlerType: NIOSSLClientHandler.self) {
                    tls.close(promise: nil)
                } else {
                    channel.close(promise: nil)
                }
                return channel.closeFuture
            }
            return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
        }
    }

    private func connect() {
        self.eventLoop.preconditionInEventLoop()
        guard !self.stopped, !self.connecting, !self.job.work.isDone else { return }
        self.connecting = true
        self.pendingConnect = nil
        if self.lastConnect != nil { self.job.recorded.withLockedValue { $0.outcomes.reconnected() } }
        self.lastConnect = .now()
        let random = SplitMix64(seed: self.random.next())
        let handler: any HTTP2ConnectionDriver & ChannelHandler =
            switch self.configuration.engine {
            case .wire:
                HTTP2WireConnectionHandler(
                    job: self.job,
                    firstStreamID: self.configuration.firstStreamID,
                    random: random
                )
            case .nio:
                HTTP2ConnectionHandler(job: self.job, firstStreamID: self.configuration.firstStreamID, random: random)
            }
        // The factory's group is this loop, so the initializer runs here too.
        let boundHandler = NIOLoopBound(handler, eventLoop: self.eventLoop)
        let job = self.job
        let engine = self.configuration.engine
        let tls = self.factory.sslContext != nil
        var events = HTTP2ConnectionFactory.Events { message in
            job.noteConnectionError(message)
            if boundHandler.value.hopeless == nil { boundHandler.value.hopeless = message }
        }
        events.failed = { message in job.noteConnectionError(message) }
        let connecting = self.factory.connect(on: self.eventLoop, addressTurn: self.addressTurn, events: events) {
            sync in
            // The wire engine writes one buffer per flush by itself.
            if tls && engine == .nio { try sync.addHandler(WriteCoalescingHandler()) }
            if engine == .nio {
                try sync.addHandler(
                    NIOHTTP2Handler(mode: .client, connectionConfiguration: HTTP2ConnectionHandler.protocol)
                )
            }
            try sync.addHandler(boundHandler.value)
        }
        // The handler holds this closure: it takes the handler weakly, or the two would keep each other (and the
        // job's rows) alive after a connection that ends without a GOAWAY.
        handler.onGoAway = { [self, weak handler] in
            let answered = handler?.answered ?? false
            self.configuration.logger.info(
                "GOAWAY: a new connection takes over",
                metadata: ["answered": "\(answered)"]
            )
            // The replacement opens now when this connection was of use (the old one finishes its streams and
            // closes); after one that brought no answer, the job backs off first.
            self.current = nil
            self.scheduleReconnect(answered: answered)
        }
        handler.onReady = { [self] in
            self.failures = 0
            self.job.anyReady.withLockedValue { $0 = true }
        }
        connecting.hop(to: self.eventLoop)
            .assumeIsolated().whenComplete { result in
                self.connecting = false
                switch result {
                case .success(let channel):
                    self.configuration.logger.info("connected", metadata: self.peers)
                    let id = ObjectIdentifier(channel)
                    self.channels[id] = channel
                    self.current = id
                    self.job.openConnections.withLockedValue { $0 += 1 }
                    channel.closeFuture.hop(to: self.eventLoop).assumeIsolated().whenComplete { _ in
                        self.job.openConnections.withLockedValue { $0 -= 1 }
                        self.configuration.logger.info(
                            "connection closed",
                            metadata: ["ready": "\(handler.isReady)", "answered": "\(handler.answered)"]
                        )
                        if !handler.isReady, let hopeless = handler.hopeless { self.stopJob(hopeless) }
                        self.closed(
                            id,
                            wasReady: handler.isReady,
                            answered: handler.answered,
                            finished: handler.finished
                        )
                    }
                    if self.stopped { channel.close(promise: nil) }
                case .failure(let error):
                    // The described failure, not the raw error: a connect to the proxy fails with the proxy's
                    // address alone, which would read as the gateway's.
                    let failure = self.factory.describe(connectError: error)
                    var metadata = self.peers
                    metadata["error"] = "\(failure.message)"
                    self.configuration.logger.warning("connect failed", metadata: metadata)
                    self.job.noteConnectionError(failure.message)
                    if let hopeless = failure.hopeless { self.stopJob(hopeless) }
                    self.failures += 1
                    self.addressTurn &+= 1
                    self.scheduleReconnect(answered: false)
                }
            }
    }

    /// Who a connection's log lines name: the gateway, and the proxy when the connection goes through one (its
    /// TCP peer is then the proxy, not the gateway; the description holds no password).
    private var peers: Logger.Metadata {
        var metadata: Logger.Metadata = ["gateway": "\(self.configuration.host):\(self.configuration.port)"]
        if let proxy = self.factory.proxy { metadata["proxy"] = "\(proxy)" }
        return metadata
    }

    /// A failure that cannot heal, before any connection of the job worked: the job stops at once with the cause.
    private func stopJob(_ cause: String) {
        guard !self.job.anyReady.withLockedValue({ $0 }) else { return }
        self.job.work.stop(
            HTTP2JobStop(
                reason: nil,
                message: "cannot connect to \(self.configuration.host):\(self.configuration.port): \(cause); "
                    + "the job stopped rather than retry"
            )
        )
    }

    private func closed(_ id: ObjectIdentifier, wasReady: Bool, answered: Bool, finished: Bool) {
        self.channels[id] = nil
        guard self.current == id else { return }  // a replaced connection: its successor is already there
        self.current = nil
        // Closed for want of rows: not replaced. Rows that come back later (retries) come from connections that
        // still have streams in flight, which take them.
        guard !finished else { return }
        if !wasReady { self.failures += 1 }
        self.scheduleReconnect(answered: answered)
    }

    /// Connects again after a connection ended (`answered`: it read an answer): after the policy's backoff for
    /// failed connects and the job's backoff for fruitless connections (`HTTP2ReconnectPacer`), whichever is
    /// later.
    private func scheduleReconnect(answered: Bool) {
        guard !self.stopped, !self.job.work.isDone, self.pendingConnect == nil, !self.connecting else { return }
        let policy = self.configuration.reconnect
        let now = NIODeadline.now()
        let settled = self.job.recorded.withLockedValue { $0.answered }
        if settled != self.progressMark.answered { self.progressMark = (settled, now) }
        let sinceProgress = UInt64(max(0, (now - self.progressMark.at).nanoseconds))
        // A stalled job (`HTTP2ProgressWatch`, Retry-After waits included) is stopped by its watchdog, with its
        // message: no slot connects again meanwhile.
        guard self.job.stall(now: now, host: self.configuration.host, port: self.configuration.port) == nil else {
            return
        }
        let since = self.lastConnect.map { UInt64(max(0, (now - $0).nanoseconds)) } ?? UInt64.max
        let paced = self.job.reconnectAt(answered: answered, now: now, random: self.random.nextUnit())
        let delay = max(
            policy.delay(
                failures: self.failures,
                sinceLastConnect: since,
                sinceProgress: sinceProgress,
                random: self.random.nextUnit()
            ),
            UInt64(max(0, (paced - now).nanoseconds))
        )
        self.configuration.logger.info(
            "reconnect",
            metadata: ["after-ms": "\(delay / 1_000_000)"]
        )
        self.pendingConnect = self.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(clamping: delay))) {
            self.pendingConnect = nil
            self.connect()
        }
    }
}
