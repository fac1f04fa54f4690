import Foundation
import SalvoSimulator
import SalvoTestSupport

/// A simulator with the HTTP/2 endpoint and broadcasts (channel management on its own port) on free loopback ports,
/// fresh certificates, and connections to both services; always shut down after `body`.
struct BroadcastHarness {
    static let app = Harness.topic
    let certificates: CertificateFactory
    let simulator: Simulator
    let client: CertificateFactory.Identity

    var registry: ChannelRegistry { self.simulator.channelRegistry! }

    static func configuration(
        _ adjust: (inout BroadcastConfiguration) -> Void = { _ in }
    ) -> BroadcastConfiguration {
        var broadcast = BroadcastConfiguration(enabledApps: [Self.app])
        broadcast.subscribers = 10
        adjust(&broadcast)
        return broadcast
    }

    static func run<R>(
        broadcast: BroadcastConfiguration = Self.configuration(),
        plan: FaultPlan = FaultPlan(),
        clock: (any SimulatorClock)? = nil,
        _ body: (BroadcastHarness) async throws -> R
    ) async throws -> R {
        let certificates = try CertificateFactory()
        var configuration = SimulatorConfiguration.testing(certificates, plan: plan)
        if let clock { configuration.clock = clock }
        configuration.http2 = HTTP2EndpointTests.endpoint
        configuration.broadcast = broadcast
        let simulator = try await Simulator.start(configuration)
        let harness = BroadcastHarness(
            certificates: certificates,
            simulator: simulator,
            client: try certificates.client(topic: Self.app)
        )
        do {
            let result = try await body(harness)
            try await simulator.shutdown()
            return result
        } catch {
            try? await simulator.shutdown()
            throw error
        }
    }

    /// A connection to the channel management port; with the app's client certificate unless `identity` says
    /// otherwise (`.some(nil)`: none, for provider tokens).
    func management(identity: CertificateFactory.Identity?? = .none) async throws -> BroadcastTestConnection {
        try await BroadcastTestConnection.connect(
            port: self.simulator.channelManagementPort!,
            identity: identity ?? self.client,
            trusting: self.certificates.ca.certificatePEM
        )
    }

    /// A connection to the HTTP/2 push port (where broadcasts go).
    func push(identity: CertificateFactory.Identity?? = .none) async throws -> BroadcastTestConnection {
        try await BroadcastTestConnection.connect(
            port: self.simulator.http2Port!,
            identity: identity ?? self.client,
            trusting: self.certificates.ca.certificatePEM
        )
    }

    static let channelsPath = "/1/apps/\(app)/channels"
    static let broadcastPath = "/4/broadcasts/apps/\(app)"

    func createChannel(
        on connection: BroadcastTestConnection,
        policy: Int = 0,
        headers: [(String, String)] = []
    ) async throws -> String {
        try await Self.createChannel(on: connection, policy: policy, headers: headers)
    }

    /// Creates a channel and returns its id (the test fails unless the answer is 201 with the id).
    static func createChannel(
        on connection: BroadcastTestConnection,
        policy: Int = 0,
        headers: [(String, String)] = []
    ) async throws -> String {
        let response = try await connection.request(
            "POST",
            Self.channelsPath,
            headers: headers,
            body: Array(#"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#.utf8)
        )
        guard response.status == 201, let id = response.header("apns-channel-id") else {
            throw BroadcastTestConnection.Failure(description: "create: \(response.status) \(response.bodyText)")
        }
        return id
    }

    /// The required broadcast headers for `channel`, with `extra` replacing or adding some.
    static func broadcastHeaders(
        _ channel: String,
        expiration: String = "0",
        priority: String = "10",
        extra: [(String, String)] = []
    ) -> [(String, String)] {
        let names = Set(extra.map(\.0))
        let base = [
            ("apns-channel-id", channel), ("apns-push-type", "liveactivity"), ("apns-expiration", expiration),
            ("apns-priority", priority),
        ]
        return base.filter { !names.contains($0.0) } + extra
    }

    static func update(_ timestamp: Int64, score: String, event: String = "update") -> [UInt8] {
        ChannelBookTests.update(timestamp, score: score, event: event)
    }
}
