import Foundation

extension FaultPlan {
    /// Refuses values no gateway could follow, naming the key: a probability or fraction outside 0…1, a negative
    /// count or time, a count that must be at least 1.
    public func validate() throws(SimulatorError) {
        let fractions: [(String, Double)] =
            [
                ("invalidTokenFraction", self.invalidTokenFraction),
                ("foreignTokenFraction", self.foreignTokenFraction),
                ("shutdown.probability", self.shutdown.probability),
                ("reset.probability", self.reset.probability),
                ("slowReader.probability", self.slowReader?.probability ?? 0),
                ("devices.offlineFraction", self.devices.offlineFraction),
                ("lostFraction", self.lostFraction),
                ("http2.tooManyRequestsRate", self.http2?.tooManyRequestsRate ?? 0),
                ("http2.internalServerErrorRate", self.http2?.internalServerErrorRate ?? 0),
                ("http2.serviceUnavailableRate", self.http2?.serviceUnavailableRate ?? 0),
                ("http2.goAwayRate", self.http2?.goAwayRate ?? 0),
                ("http2.resetRate", self.http2?.resetRate ?? 0),
                ("http2.shrinkRate", self.http2?.shrinkRate ?? 0),
                ("http2.errorBurstRate", self.http2?.errorBurstRate ?? 0),
            ] + (self.broadcast?.fractions ?? [])
        for (key, value) in fractions where !(0...1).contains(value) {
            throw SimulatorError(.invalidFaultPlan, "\(key) is a probability between 0 and 1, not \(value)")
        }
        let counts: [(String, Int, Int)] = [
            ("shutdown.everyAccepted", self.shutdown.everyAccepted, 0),
            ("reset.withinNotifications", self.reset.withinNotifications, 1),
            ("slowReader.chunkSize", self.slowReader?.chunkSize ?? 1, 1),
            ("slowReader.delayMilliseconds", self.slowReader?.delayMilliseconds ?? 0, 0),
            ("connectionLimits.maxOpen", self.connectionLimits.maxOpen, 0),
            (
                "connectionLimits.minIntervalPerClientMilliseconds",
                self.connectionLimits.minIntervalPerClientMilliseconds, 0
            ),
            ("connectionLimits.maxConnectsPerSecond", self.connectionLimits.maxConnectsPerSecond, 0),
            ("errorDelayMilliseconds", self.errorDelayMilliseconds, 0),
            ("latencyMilliseconds", self.latencyMilliseconds, 0),
            ("jitterMilliseconds", self.jitterMilliseconds, 0),
            ("http2.retryAfterSeconds", self.http2?.retryAfterSeconds ?? 0, 0),
            ("http2.goAwayAfterStreams", self.http2?.goAwayAfterStreams ?? 1, 1),
            ("http2.shrinkAfterStreams", self.http2?.shrinkAfterStreams ?? 1, 1),
            ("http2.shrinkTo", self.http2?.shrinkTo ?? 1, 1),
            ("http2.shrinkConnections", self.http2?.shrinkConnections ?? 1, 1),
            ("http2.restoreAfterStreams", self.http2?.restoreAfterStreams ?? 1, 1),
            ("http2.responseDelayMilliseconds", self.http2?.responseDelayMilliseconds ?? 0, 0),
            ("http2.shrinkForStreams", self.http2?.shrinkForStreams ?? 1, 1),
            ("http2.errorBurstLength", self.http2?.errorBurstLength ?? 1, 1),
        ]
        for (key, value, minimum) in counts where value < minimum {
            throw SimulatorError(.invalidFaultPlan, "\(key) must be \(minimum) or more, not \(value)")
        }
    }

    /// Reads a plan from JSON text, refusing keys it does not know (a misspelt fault would silently do nothing)
    /// and values it cannot follow (`validate()`).
    public static func decode(_ data: Data) throws(SimulatorError) -> FaultPlan {
        let plan: FaultPlan
        let given: Any
        let known: Any
        do {
            plan = try JSONDecoder().decode(FaultPlan.self, from: data)
            given = try JSONSerialization.jsonObject(with: data)
            // Every key the plan understands appears when it is written out again.
            known = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(plan))
        } catch {
            throw SimulatorError(.invalidFaultPlan, "\(error)")
        }
        if let unknown = Self.unknownKeys(given, known, path: "").first {
            throw SimulatorError(.invalidFaultPlan, "unknown key '\(unknown)'")
        }
        try plan.validate()
        return plan
    }

    private static func unknownKeys(_ given: Any, _ known: Any, path: String) -> [String] {
        if let given = given as? [String: Any] {
            let known = known as? [String: Any] ?? [:]
            return given.keys.sorted().flatMap { key -> [String] in
                let name = path.isEmpty ? key : path + "." + key
                guard let value = known[key] else { return given[key] is NSNull ? [] : [name] }
                return unknownKeys(given[key]!, value, path: name)
            }
        }
        if let given = given as? [Any], let known = known as? [Any] {
            return zip(given, known).enumerated().flatMap { index, pair in
                unknownKeys(pair.0, pair.1, path: "\(path)[\(index)]")
            }
        }
        return []
    }
}
