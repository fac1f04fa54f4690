import APNSWire

/// A `FaultPlan` turned into what the gateway checks per notification: token sets instead of hex
/// strings. Built once at start; immutable afterwards, so every event loop reads it without a lock.
struct CompiledFaultPlan: Sendable {
    let plan: FaultPlan
    let invalidTokens: TokenSet
    let foreignTokens: TokenSet
    /// Tokens no longer valid: HTTP/2 answers them 410 ExpiredToken.
    let expiredTokens: TokenSet
    let offlineTokens: TokenSet
    /// Feedback lists per topic: (timestamp or nil for "start time", token, and when it registered again).
    let uninstalled: [(topic: String, timestamp: UInt32?, token: DeviceToken, reregisteredAt: UInt32?)]
    /// Tokens of uninstalled apps that did not register again: not delivering them is right.
    let goneTokens: TokenSet
    /// Tokens of apps installed again after the feedback timestamp: they must still be delivered.
    let reregisteredTokens: TokenSet

    init(_ plan: FaultPlan) throws(SimulatorError) {
        self.plan = plan
        self.invalidTokens = try Self.tokenSet(plan.invalidTokens, field: "invalidTokens")
        self.foreignTokens = try Self.tokenSet(plan.foreignTokens, field: "foreignTokens")
        self.expiredTokens = try Self.tokenSet(plan.expiredTokens, field: "expiredTokens")
        self.offlineTokens = try Self.tokenSet(plan.devices.offlineTokens, field: "devices.offlineTokens")
        var uninstalled: [(topic: String, timestamp: UInt32?, token: DeviceToken, reregisteredAt: UInt32?)] = []
        var gone = TokenSet(expectedCount: plan.uninstalled.reduce(0) { $0 + $1.tokens.count })
        var reregistered = TokenSet(expectedCount: plan.uninstalled.reduce(0) { $0 + $1.tokens.count })
        for list in plan.uninstalled {
            if let again = list.reregisteredAt, let timestamp = list.timestamp, again <= timestamp {
                throw SimulatorError(
                    .invalidFaultPlan,
                    "uninstalled.reregisteredAt (\(again)) must be later than its timestamp (\(timestamp))"
                )
            }
            for hex in list.tokens {
                let token = try Self.token(hex, field: "uninstalled.tokens")
                uninstalled.append((list.topic, list.timestamp, token, list.reregisteredAt))
                token.withUnsafeBytes { _ = list.reregisteredAt == nil ? gone.insert($0) : reregistered.insert($0) }
            }
        }
        self.uninstalled = uninstalled
        self.goneTokens = gone
        self.reregisteredTokens = reregistered
        for (name, p) in [
            ("invalidTokenFraction", plan.invalidTokenFraction), ("foreignTokenFraction", plan.foreignTokenFraction),
            ("shutdown.probability", plan.shutdown.probability),
            ("reset.probability", plan.reset.probability), ("devices.offlineFraction", plan.devices.offlineFraction),
            ("lostFraction", plan.lostFraction),
        ] where !(0...1).contains(p) {
            throw SimulatorError(.invalidFaultPlan, "\(name) must be between 0 and 1, not \(p)")
        }
        for (name, milliseconds) in [
            ("latencyMilliseconds", plan.latencyMilliseconds), ("jitterMilliseconds", plan.jitterMilliseconds),
        ] where milliseconds < 0 {
            throw SimulatorError(.invalidFaultPlan, "\(name) must be 0 or more, not \(milliseconds)")
        }
    }

    /// True when the gateway answers the 32-byte token at `token` with status 8: listed, in the
    /// seeded invalid fraction, or of the other environment (first byte odd = production).
    @inline(__always)
    func isInvalid(_ token: UnsafeRawPointer) -> Bool {
        switch self.plan.environment {
        case .any: break
        case .sandbox: if token.load(as: UInt8.self) & 1 == 1 { return true }
        case .production: if token.load(as: UInt8.self) & 1 == 0 { return true }
        }
        return self.invalidTokens.contains(token)
            || TokenHash.isInFraction(token, fraction: self.plan.invalidTokenFraction, seed: self.plan.seed)
    }

    /// True when the 32-byte token at `token` is registered for another app, so the HTTP/2 endpoint answers
    /// DeviceTokenNotForTopic: listed, or in the seeded fraction (keyed apart from the invalid fraction, so the
    /// two fractions pick independent tokens). The binary gateway does not ask: its protocol has no such status.
    @inline(__always)
    func isForeignToTopic(_ token: UnsafeRawPointer) -> Bool {
        self.foreignTokens.contains(token)
            || TokenHash.isInFraction(token, fraction: self.plan.foreignTokenFraction, seed: self.plan.seed ^ 0xF0_4E16)
    }

    private static func token(_ hex: String, field: String) throws(SimulatorError) -> DeviceToken {
        do {
            return try DeviceToken(hex: hex)
        } catch {
            throw SimulatorError(.invalidFaultPlan, "\(field): '\(hex)' is not a device token: \(error)")
        }
    }

    private static func tokenSet(_ hexes: [String], field: String) throws(SimulatorError) -> TokenSet {
        var set = TokenSet(expectedCount: hexes.count)
        for hex in hexes {
            let token = try self.token(hex, field: field)
            token.withUnsafeBytes { _ = set.insert($0) }
        }
        return set
    }
}

extension CompiledFaultPlan {
    /// The handler that holds a connection's bytes for the plan's latency, nil when the plan has none; `stream`
    /// tells connections apart for the jitter's generator.
    func latencyHandler(stream: UInt64) -> LatencyHandler? {
        guard self.plan.latencyMilliseconds > 0 || self.plan.jitterMilliseconds > 0 else { return nil }
        return LatencyHandler(
            latencyMilliseconds: self.plan.latencyMilliseconds,
            jitterMilliseconds: self.plan.jitterMilliseconds,
            random: SeededGenerator(seed: self.plan.seed ^ 0x1A7E, stream: stream)
        )
    }
}
