import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

extension Simulator {
    /// The channel registry of a configuration that asks for broadcasts; nil when it does not. Broadcasts need the
    /// HTTP/2 endpoint: its port serves them, and its provider keys sign for both services.
    static func makeChannelRegistry(
        _ configuration: SimulatorConfiguration,
        plan: CompiledFaultPlan,
        startTime: UInt32
    ) throws(SimulatorError) -> ChannelRegistry? {
        guard let broadcast = configuration.broadcast else { return nil }
        guard configuration.http2 != nil else {
            throw SimulatorError(.startup, "broadcasts need the HTTP/2 endpoint (its port serves them)")
        }
        guard broadcast.channelLimit >= 0, broadcast.subscribers >= 0, broadcast.budget.windowSeconds >= 1,
            broadcast.budget.noMessageStored >= 0, broadcast.budget.mostRecentMessageStored >= 0
        else {
            throw SimulatorError(
                .startup,
                "broadcast limits are whole numbers ≥ 0 and the budget window at least 1 second (got channel limit "
                    + "\(broadcast.channelLimit), subscribers \(broadcast.subscribers), budget "
                    + "\(broadcast.budget.noMessageStored)/\(broadcast.budget.mostRecentMessageStored) per "
                    + "\(broadcast.budget.windowSeconds) s)"
            )
        }
        for (key, value) in (plan.plan.broadcast ?? broadcast.faults).fractions where !(0...1).contains(value) {
            throw SimulatorError(.startup, "\(key) is a probability between 0 and 1, not \(value)")
        }
        return ChannelRegistry(
            configuration: broadcast,
            faults: plan.plan.broadcast ?? broadcast.faults,
            seed: plan.plan.seed,
            offlineFraction: plan.plan.devices.offlineFraction,
            onlineAt: plan.plan.devices.onlineAfterSeconds.map { startTime &+ $0 },
            clock: configuration.clock
        )
    }

    /// The channel management endpoint: HTTP/2 over TLS on its own port, a client certificate or provider tokens
    /// (the HTTP/2 endpoint's keys), every request answered by `BroadcastRoutes`. No faults of the push port apply.
    static func bindChannelManagement(
        _ configuration: SimulatorConfiguration,
        http2: HTTP2EndpointConfiguration,
        registry: ChannelRegistry,
        verifier: ProviderTokenVerifier,
        plan: CompiledFaultPlan,
        ledger: DeliveryLedger,
        group: MultiThreadedEventLoopGroup
    ) async throws -> any Channel {
        let sslContext = try self.makeSSLContext(configuration.tls, http2: true)
        let shared = HTTP2GatewayHandler.Shared(
            ledger: ledger,
            plan: plan,
            verifier: verifier,
            faults: HTTP2EndpointConfiguration.Faults(),
            maximumConcurrentStreams: http2.maximumConcurrentStreams,
            seed: plan.plan.seed ^ 0xC4A7,
            uninstalled: [:],
            clock: configuration.clock,
            routes: BroadcastRoutes(registry: registry, management: true)
        )
        let serials = NIOLockedValueBox<UInt32>(0)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let serial = serials.withLockedValue { serial in
                    serial &+= 1
                    return serial
                }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(
                        HTTP2GatewayHandler(shared: shared, connection: serial, allocator: channel.allocator)
                    )
                }
            }
            .bind(host: configuration.host, port: registry.configuration.channelManagementPort)
            .get()
    }
}
