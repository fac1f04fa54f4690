import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import SalvoRows

/// One of a job's connection places: keeps one connection open on its event loop while the job has work,
/// replaces it after GOAWAY or a close, and backs off (with the shared `ReconnectPolicy`) after failures. The
/// decisions are `HTTP2SlotMachine`'s; this drives it with the channels, the timer and the job.
///
/// Confined to `eventLoop`: every method runs there. `@unchecked Sendable` so the pool can hold it; no field is
/// touched off that loop.
final class HTTP2ConnectionSlot: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let configuration: HTTP2ClientConfiguration
    /// Opens each connection: proxy tunnel, TLS and its checks.
    private let factory: HTTP2ConnectionFactory
    private let job: HTTP2JobContext
    /// When to connect, replace and back off. Giving up is the job's decision (`HTTP2JobContext.stall`), never a
    /// slot's.
    private var machine: HTTP2SlotMachine
    private var channels: [ObjectIdentifier: any Channel] = [:]
    private var pendingConnect: Scheduled<Void>?

    init(
        index: Int,
        eventLoop: any EventLoop,
        random: SplitMix64,
        configuration: HTTP2ClientConfiguration,
        factory: HTTP2ConnectionFactory,
        job: HTTP2JobContext
    ) {
        self.eventLoop = eventLoop
        self.machine = HTTP2SlotMachine(index: index, policy: configuration.reconnect, random: random, now: job.now())
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
            self.machine.stop()
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
            self.machine.stop()
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

    /// What the slot knows of its job for the machine.
    private var jobView: HTTP2SlotMachine.Job {
        HTTP2SlotMachine.Job(settled: self.job.recorded.withLockedValue { $0.answered }, isDone: self.job.work.isDone)
    }

    private func connect() {
        self.eventLoop.preconditionInEventLoop()
        guard
            case .connect(let seed, let addressTurn, let replacing) = self.machine.connectNow(
                now: self.job.now(),
                jobIsDone: self.job.work.isDone
            )
        else { return }
        self.pendingConnect = nil
        if replacing { self.job.recorded.withLockedValue { $0.outcomes.reconnected() } }
        let random = SplitMix64(seed: seed)
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
        let gate = self.job.gate
        let connecting = self.factory.connect(on: self.eventLoop, addressTurn: addressTurn, events: events) {
            sync in
            if let gate { try sync.addHandler(WriteFenceHandler(gate: gate), position: .first) }
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
            let now = self.job.now()
            self.perform(self.machine.goAway(answered: answered, now: now, job: self.jobView), now: now)
        }
        handler.onReady = { [self] in
            self.machine.ready()
            self.job.anyReady.withLockedValue { $0 = true }
        }
        connecting.hop(to: self.eventLoop)
            .assumeIsolated().whenComplete { result in
                switch result {
                case .success(let channel):
                    self.configuration.logger.info("connected", metadata: self.peers)
                    let id = ObjectIdentifier(channel)
                    self.channels[id] = channel
                    let opened = self.machine.connected(id)
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
                    if opened == .close { channel.close(promise: nil) }
                case .failure(let error):
                    // The described failure, not the raw error: a connect to the proxy fails with the proxy's
                    // address alone, which would read as the gateway's.
                    let failure = self.factory.describe(connectError: error)
                    var metadata = self.peers
                    metadata["error"] = "\(failure.message)"
                    self.configuration.logger.warning("connect failed", metadata: metadata)
                    self.job.noteConnectionError(failure.message)
                    if let hopeless = failure.hopeless { self.stopJob(hopeless) }
                    let now = self.job.now()
                    self.perform(self.machine.connectFailed(now: now, job: self.jobView), now: now)
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
        let now = self.job.now()
        let action = self.machine.closed(
            id,
            wasReady: wasReady,
            answered: answered,
            finished: finished,
            now: now,
            job: self.jobView
        )
        self.perform(action, now: now)
    }

    /// Performs what the machine decided after a connection ended: a reconnect, unless the job has stalled
    /// (`HTTP2ProgressWatch`, Retry-After waits included: its watchdog stops it, with its message, and no slot
    /// connects again meanwhile), after the policy's backoff for failed connects and the job's backoff for fruitless
    /// connections (`HTTP2ReconnectPacer`), whichever is later.
    private func perform(_ action: HTTP2SlotMachine.Action, now: NIODeadline) {
        switch action {
        case .none, .close, .connect, .scheduleConnect:
            return
        case .reconnectUnlessStalled(let answered, let jitter):
            guard self.job.stall(now: now, host: self.configuration.host, port: self.configuration.port) == nil else {
                return
            }
            let paced = self.job.reconnectAt(answered: answered, now: now, random: jitter)
            guard case .scheduleConnect(let delay) = self.machine.reconnect(now: now, pacedUntil: paced) else {
                return
            }
            self.configuration.logger.info(
                "reconnect",
                metadata: ["after-ms": "\(delay.nanoseconds / 1_000_000)"]
            )
            self.pendingConnect = self.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                self.pendingConnect = nil
                self.connect()
            }
        }
    }
}
