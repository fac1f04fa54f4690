import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A running APNs simulator: the binary gateway and the feedback service on their own ports, with
/// mutual TLS, a fault plan, a delivery ledger and a quality-of-service model.
///
/// ```swift
/// let tls = SimulatorConfiguration.TLS(certificatePEM: server, privateKeyPEM: serverKey, clientCAPEM: ca)
/// let sim = try await Simulator.start(SimulatorConfiguration(tls: tls))
/// // connect to 127.0.0.1:\(sim.gatewayPort) with a client certificate the CA signed …
/// let verdict = sim.verdict(expected: expectedTokens)
/// try await sim.shutdown()
/// ```
/// Owns its event loop group; `shutdown()` closes every connection and stops the threads.
public final class Simulator: Sendable {
    /// The gateway's port (the one picked when the configuration said 0).
    public let gatewayPort: Int
    /// The feedback service's port.
    public let feedbackPort: Int
    /// The HTTP/2 endpoint's port (TLS, with or without ALPN), when the configuration asked for one.
    public let http2Port: Int?
    /// The HTTP/2 endpoint's cleartext port (prior knowledge, token authentication only), when asked for.
    public let http2CleartextPort: Int?
    /// The channel management endpoint's port (TLS, HTTP/2), when the configuration asked for broadcasts.
    public let channelManagementPort: Int?
    /// The channels and the broadcast ledger, when the configuration asked for broadcasts.
    public let channelRegistry: ChannelRegistry?
    /// Every accepted notification, and the counters.
    public let ledger: DeliveryLedger
    /// What devices show of the Live Activity pushes the HTTP/2 endpoint accepted (the latest timestamp wins).
    public let liveActivities: LiveActivities
    /// The clock's time when the simulator started (UNIX seconds).
    public let startTime: UInt32
    /// The plan in force.
    public var plan: FaultPlan { self.compiledPlan.plan }
    /// How many distinct provider tokens (by their text) the HTTP/2 endpoint has accepted: a fleet
    /// that shares one token shows 1.
    public var acceptedProviderTokens: Int { self.tokenVerifier?.acceptedTokens ?? 0 }
    let compiledPlan: CompiledFaultPlan
    private let tokenVerifier: ProviderTokenVerifier?

    private let group: MultiThreadedEventLoopGroup
    private let channels: [any Channel]
    private let feedback: FeedbackStore
    private let clock: any SimulatorClock

    private init(
        gatewayPort: Int,
        feedbackPort: Int,
        http2Port: Int?,
        http2CleartextPort: Int?,
        ledger: DeliveryLedger,
        startTime: UInt32,
        plan: CompiledFaultPlan,
        group: MultiThreadedEventLoopGroup,
        channels: [any Channel],
        feedback: FeedbackStore,
        tokenVerifier: ProviderTokenVerifier?,
        clock: any SimulatorClock,
        channelManagementPort: Int? = nil,
        channelRegistry: ChannelRegistry? = nil,
        liveActivities: LiveActivities
    ) {
        self.liveActivities = liveActivities
        self.channelManagementPort = channelManagementPort
        self.channelRegistry = channelRegistry
        self.gatewayPort = gatewayPort
        self.feedbackPort = feedbackPort
        self.http2Port = http2Port
        self.http2CleartextPort = http2CleartextPort
        self.ledger = ledger
        self.startTime = startTime
        self.compiledPlan = plan
        self.group = group
        self.channels = channels
        self.feedback = feedback
        self.tokenVerifier = tokenVerifier
        self.clock = clock
    }

    /// Starts both services and returns once they listen.
    public static func start(_ configuration: SimulatorConfiguration) async throws -> Simulator {
        let plan = try CompiledFaultPlan(configuration.plan)
        let sslContext = try self.makeSSLContext(configuration.tls)
        let clock = configuration.clock
        let startTime = clock.now()
        let channelRegistry = try self.makeChannelRegistry(configuration, plan: plan, startTime: startTime)
        let devices = DeviceModel(
            offline: plan.offlineTokens,
            offlineFraction: plan.plan.devices.offlineFraction,
            seed: plan.plan.seed,
            onlineAt: plan.plan.devices.onlineAfterSeconds.map { startTime &+ $0 },
            storageLimit: plan.plan.devices.storageLimitSeconds
        )
        let ledger = DeliveryLedger(
            maximumTokens: configuration.maximumTokens,
            expectedTokens: configuration.expectedTokens,
            devices: devices,
            clock: clock,
            lostFraction: plan.plan.lostFraction,
            seed: plan.plan.seed
        )
        let feedback = FeedbackStore()
        let liveActivities = LiveActivities()
        for entry in plan.uninstalled {
            feedback.add(
                topic: entry.topic,
                tuple: FeedbackTuple(timestamp: entry.timestamp ?? startTime, token: entry.token)
            )
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        do {
            let gateway = try await self.bindGateway(
                configuration,
                plan: plan,
                ssl: sslContext,
                ledger: ledger,
                group: group
            )
            let feedbackSerials = NIOLockedValueBox<UInt64>(0)
            let feedbackChannel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        let serial = feedbackSerials.withLockedValue { serial in
                            serial &+= 1
                            return serial
                        }
                        if let latency = plan.latencyHandler(stream: 0xFEED_0000_0000 | serial) {
                            try sync.addHandler(latency)
                        }
                        try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                        try sync.addHandler(FeedbackHandler(store: feedback, ledger: ledger))
                    }
                }
                .bind(host: configuration.host, port: configuration.feedbackPort)
                .get()
            var http2Channels: (tls: any Channel, cleartext: (any Channel)?)?
            let tokenVerifier = configuration.http2.map {
                ProviderTokenVerifier(
                    keys: $0.providerKeys,
                    clock: configuration.clock,
                    environment: configuration.plan.environment
                )
            }
            if let http2 = configuration.http2, let tokenVerifier {
                http2Channels = try await self.bindHTTP2(
                    configuration,
                    http2: http2,
                    verifier: tokenVerifier,
                    plan: plan,
                    ledger: ledger,
                    group: group,
                    startTime: startTime,
                    routes: channelRegistry.map { BroadcastRoutes(registry: $0, management: false) },
                    liveActivities: liveActivities
                )
            }
            var management: (any Channel)?
            if let channelRegistry, let http2 = configuration.http2, let tokenVerifier {
                management = try await self.bindChannelManagement(
                    configuration,
                    http2: http2,
                    registry: channelRegistry,
                    verifier: tokenVerifier,
                    plan: plan,
                    ledger: ledger,
                    group: group
                )
            }
            return Simulator(
                gatewayPort: gateway.localAddress?.port ?? configuration.gatewayPort,
                feedbackPort: feedbackChannel.localAddress?.port ?? configuration.feedbackPort,
                http2Port: http2Channels.map { $0.tls.localAddress?.port ?? 0 },
                http2CleartextPort: http2Channels?.cleartext.map { $0.localAddress?.port ?? 0 },
                ledger: ledger,
                startTime: startTime,
                plan: plan,
                group: group,
                channels: [gateway, feedbackChannel]
                    + [http2Channels?.tls, http2Channels?.cleartext, management].compactMap { $0 },
                feedback: feedback,
                tokenVerifier: tokenVerifier,
                clock: clock,
                channelManagementPort: management.map { $0.localAddress?.port ?? 0 },
                channelRegistry: channelRegistry,
                liveActivities: liveActivities
            )
        } catch {
            try? await group.shutdownGracefully()
            throw SimulatorError(.startup, "cannot listen on \(configuration.host): \(error)")
        }
    }

    /// Closes both services and every connection, and stops the event loop threads.
    public func shutdown() async throws {
        for channel in self.channels { try? await channel.close() }
        try await self.group.shutdownGracefully()
    }

    /// Adds `token` to the feedback list of `topic` (timestamp: now), as if its app was removed.
    public func markUninstalled(_ token: DeviceToken, topic: String, timestamp: UInt32? = nil) {
        self.feedback.add(topic: topic, tuple: FeedbackTuple(timestamp: timestamp ?? self.clock.now(), token: token))
    }

    /// Feedback tuples waiting for `topic`.
    public func pendingFeedback(topic: String) -> Int {
        self.feedback.pending(topic: topic)
    }

    private static func bindGateway(
        _ configuration: SimulatorConfiguration,
        plan: CompiledFaultPlan,
        ssl: NIOSSLContext,
        ledger: DeliveryLedger,
        group: MultiThreadedEventLoopGroup
    ) async throws -> any Channel {
        let gate = ConnectionGate(limits: plan.plan.connectionLimits)
        let serials = NIOLockedValueBox<UInt32>(0)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                let serial = serials.withLockedValue { serial in
                    serial &+= 1
                    return serial
                }
                if let reason = gate.admit(address: channel.remoteAddress?.ipAddress ?? "unknown") {
                    ledger.recordConnectionRefused(reason: reason)
                    return channel.close()
                }
                ledger.recordConnectionAccepted()
                channel.closeFuture.whenComplete { _ in gate.release() }
                return channel.eventLoop.makeCompletedFuture {
                    var slowReader: FaultPlan.SlowReader?
                    if let slow = plan.plan.slowReader {
                        var random = SeededGenerator(seed: plan.plan.seed ^ 0x5105, stream: UInt64(serial))
                        if random.chance(slow.probability) { slowReader = slow }
                    }
                    if let slowReader {
                        // One chunk per read: one socket read of at most chunkSize bytes, then a wait.
                        try channel.syncOptions?.setOption(
                            .recvAllocator,
                            value: FixedSizeRecvByteBufferAllocator(capacity: max(1, slowReader.chunkSize))
                        )
                        try channel.syncOptions?.setOption(.maxMessagesPerRead, value: 1)
                    }
                    let resetter = ConnectionResetHandler()
                    let sync = channel.pipeline.syncOperations
                    if let latency = plan.latencyHandler(stream: UInt64(serial)) { try sync.addHandler(latency) }
                    try sync.addHandler(resetter)
                    if let slowReader {
                        try sync.addHandler(SlowReadHandler(delayMilliseconds: slowReader.delayMilliseconds))
                    }
                    try sync.addHandler(NIOSSLServerHandler(context: ssl))
                    try sync.addHandler(
                        GatewayHandler(
                            plan: plan,
                            ledger: ledger,
                            connection: serial,
                            resetter: resetter
                        )
                    )
                }
            }
            .bind(host: configuration.host, port: configuration.gatewayPort)
            .get()
    }

    private static func bindHTTP2(
        _ configuration: SimulatorConfiguration,
        http2: HTTP2EndpointConfiguration,
        verifier: ProviderTokenVerifier,
        plan: CompiledFaultPlan,
        ledger: DeliveryLedger,
        group: MultiThreadedEventLoopGroup,
        startTime: UInt32,
        routes: BroadcastRoutes? = nil,
        liveActivities: LiveActivities? = nil
    ) async throws -> (tls: any Channel, cleartext: (any Channel)?) {
        let sslContext = try self.makeSSLContext(configuration.tls, http2: true)
        var uninstalled: [String: [DeviceToken: UInt32]] = [:]
        // A device that registered its token again takes notifications again: no 410 for it.
        for entry in plan.uninstalled where entry.reregisteredAt == nil {
            uninstalled[entry.topic, default: [:]][entry.token] = entry.timestamp ?? startTime
        }
        let shared = HTTP2GatewayHandler.Shared(
            ledger: ledger,
            plan: plan,
            verifier: verifier,
            faults: plan.plan.http2 ?? http2.faults,
            maximumConcurrentStreams: http2.maximumConcurrentStreams,
            seed: plan.plan.seed,
            uninstalled: uninstalled,
            clock: configuration.clock,
            routes: routes,
            liveActivities: liveActivities
        )
        let serials = NIOLockedValueBox<UInt32>(0)
        func bind(port: Int, tls: NIOSSLContext?) async throws -> any Channel {
            try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 256)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    let serial = serials.withLockedValue { serial in
                        serial &+= 1
                        return serial
                    }
                    ledger.recordConnectionAccepted()
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let latency = plan.latencyHandler(stream: 0x4832_0000_0000 | UInt64(serial)) {
                            try sync.addHandler(latency)
                        }
                        // Below TLS, so that a planned reset closes the socket without a close_notify.
                        let resetter = ConnectionResetHandler()
                        try sync.addHandler(resetter)
                        if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
                        try sync.addHandler(
                            HTTP2GatewayHandler(
                                shared: shared,
                                connection: serial,
                                allocator: channel.allocator,
                                resetter: resetter
                            )
                        )
                    }
                }
                .bind(host: configuration.host, port: port)
                .get()
        }
        let tls = try await bind(port: http2.port, tls: sslContext)
        guard let cleartextPort = http2.cleartextPort else { return (tls, nil) }
        do {
            return (tls, try await bind(port: cleartextPort, tls: nil))
        } catch {
            try? await tls.close()
            throw error
        }
    }

    static func makeSSLContext(_ tls: SimulatorConfiguration.TLS, http2: Bool = false) throws -> NIOSSLContext {
        do {
            let certificate = try NIOSSLCertificate(bytes: Array(tls.certificatePEM.utf8), format: .pem)
            let key = try NIOSSLPrivateKey(bytes: Array(tls.privateKeyPEM.utf8), format: .pem)
            let ca = try NIOSSLCertificate(bytes: Array(tls.clientCAPEM.utf8), format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: [.certificate(certificate)],
                privateKey: .privateKey(key)
            )
            configuration.minimumTLSVersion = .tlsv12
            // Mutual TLS: the client must present a certificate from the development CA (over HTTP/2 a client
            // may instead authenticate each request with a provider token).
            configuration.certificateVerification = http2 ? .optionalVerification : .noHostnameVerification
            // ALPN `h2` when the client offers it; a client that offers none is spoken to in HTTP/2 all the same.
            if http2 { configuration.applicationProtocols = ["h2"] }
            configuration.trustRoots = .certificates([ca])
            // After an error response the peer rarely answers close_notify; don't hold the socket.
            configuration.shutdownTimeout = .milliseconds(500)
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw SimulatorError(.certificates, "cannot set up TLS from the given PEM texts: \(error)")
        }
    }
}

extension Simulator {
    /// Judges the ledger so far against `expected` (see `Verdict`), listing at most `listLimit`
    /// tokens per category.
    public func verdict(expected: ExpectedTokens, listLimit: Int = 100) -> Verdict {
        Verdict.judge(ledger: self.ledger, expected: expected, plan: self.compiledPlan, listLimit: listLimit)
    }
}
