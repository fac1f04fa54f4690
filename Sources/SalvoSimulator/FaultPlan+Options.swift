extension FaultPlan {
    /// The command-line style options a plan understands, for `salvo simulate --fault …` and tests.
    ///
    /// `name=value` pairs: `seed`, `environment` (any|sandbox|production), `invalid-token` (hex,
    /// repeatable), `invalid-fraction`, `foreign-token` (hex, repeatable; HTTP/2 DeviceTokenNotForTopic),
    /// `foreign-fraction`, `expired-token` (hex, repeatable; HTTP/2 410 ExpiredToken), `shutdown-every`, `shutdown-probability`, `reset-probability`,
    /// `reset-scope` (notification|connection), `reset-within`, `slow-chunk`, `slow-delay-ms`,
    /// `slow-probability`, `max-open`, `min-connect-interval-ms`, `max-connects-per-second`,
    /// `error-delay-ms`, `offline-token` (hex, repeatable), `offline-fraction`, `online-after-s`,
    /// `uninstalled` (`topic:hex[:timestamp[:reregistered-at]]`, repeatable), `latency-ms`, `jitter-ms`; HTTP/2: `h2-429-rate`,
    /// `h2-retry-after-s`, `h2-500-rate`, `h2-503-rate`, `h2-goaway-after`, `h2-shrink-after`, `h2-shrink-to`,
    /// `h2-restore-after`, `h2-answer-delay-ms`, `h2-token-start-one` (true|false), `h2-drop-to-one` (true|false),
    /// `h2-goaway-rate`, `h2-reset-rate`, `h2-shrink-rate`, `h2-shrink-for`, `h2-burst-rate`, `h2-burst-length`;
    /// `lost-fraction` (a broken gateway that loses what it accepted, to test the checks).
    public static let optionNames: [String] = [
        "seed", "environment", "invalid-token", "invalid-fraction", "foreign-token", "foreign-fraction",
        "expired-token",
        "shutdown-every", "shutdown-probability",
        "reset-probability", "reset-scope", "reset-within", "slow-chunk", "slow-delay-ms", "slow-probability",
        "max-open", "min-connect-interval-ms", "max-connects-per-second", "error-delay-ms", "offline-token",
        "offline-fraction", "online-after-s", "uninstalled", "latency-ms", "jitter-ms",
        "h2-429-rate", "h2-retry-after-s", "h2-500-rate", "h2-503-rate", "h2-goaway-after", "h2-shrink-after",
        "h2-shrink-to", "h2-restore-after", "h2-answer-delay-ms", "h2-token-start-one", "h2-drop-to-one",
        "h2-goaway-rate", "h2-reset-rate", "h2-shrink-rate", "h2-shrink-for", "h2-burst-rate", "h2-burst-length",
        "lost-fraction",
    ]

    /// Applies `name=value` options in order, on top of this plan.
    public mutating func apply(options: [String]) throws(SimulatorError) {
        for option in options {
            guard let equals = option.firstIndex(of: "=") else {
                throw SimulatorError(.invalidFaultPlan, "fault option '\(option)' is not name=value")
            }
            try self.apply(String(option[..<equals]), String(option[option.index(after: equals)...]))
        }
    }

    /// Applies one option; see `optionNames`.
    public mutating func apply(_ name: String, _ value: String) throws(SimulatorError) {
        switch name {
        case "seed": self.seed = try Self.number(name, value)
        case "environment":
            guard let environment = Environment(rawValue: value) else {
                throw SimulatorError(
                    .invalidFaultPlan,
                    "environment must be any, sandbox or production, not '\(value)'"
                )
            }
            self.environment = environment
        case "invalid-token": self.invalidTokens.append(value)
        case "invalid-fraction": self.invalidTokenFraction = try Self.fraction(name, value)
        case "foreign-token": self.foreignTokens.append(value)
        case "foreign-fraction": self.foreignTokenFraction = try Self.fraction(name, value)
        case "expired-token": self.expiredTokens.append(value)
        case "shutdown-every": self.shutdown.everyAccepted = try Self.number(name, value)
        case "shutdown-probability": self.shutdown.probability = try Self.fraction(name, value)
        case "reset-probability": self.reset.probability = try Self.fraction(name, value)
        case "reset-scope":
            guard let scope = Reset.Scope(rawValue: value) else {
                throw SimulatorError(
                    .invalidFaultPlan,
                    "reset-scope must be notification or connection, not '\(value)'"
                )
            }
            self.reset.scope = scope
        case "reset-within": self.reset.withinNotifications = max(1, try Self.number(name, value))
        case "slow-chunk":
            var slow = self.slowReader ?? SlowReader()
            slow.chunkSize = max(1, try Self.number(name, value))
            self.slowReader = slow
        case "slow-delay-ms":
            var slow = self.slowReader ?? SlowReader()
            slow.delayMilliseconds = try Self.number(name, value)
            self.slowReader = slow
        case "slow-probability":
            var slow = self.slowReader ?? SlowReader()
            slow.probability = try Self.fraction(name, value)
            self.slowReader = slow
        case "max-open": self.connectionLimits.maxOpen = try Self.number(name, value)
        case "min-connect-interval-ms":
            self.connectionLimits.minIntervalPerClientMilliseconds = try Self.number(name, value)
        case "max-connects-per-second": self.connectionLimits.maxConnectsPerSecond = try Self.number(name, value)
        case "error-delay-ms": self.errorDelayMilliseconds = try Self.number(name, value)
        case "offline-token": self.devices.offlineTokens.append(value)
        case "offline-fraction": self.devices.offlineFraction = try Self.fraction(name, value)
        case "online-after-s": self.devices.onlineAfterSeconds = try Self.number(name, value)
        case "uninstalled":
            let parts = value.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard (2...4).contains(parts.count), !parts[0].isEmpty else {
                throw SimulatorError(
                    .invalidFaultPlan,
                    "uninstalled must be topic:hex[:timestamp[:reregistered-at]], not '\(value)'"
                )
            }
            let timestamp: UInt32? = parts.count >= 3 ? try Self.number(name, parts[2]) : nil
            let again: UInt32? = parts.count == 4 ? try Self.number(name, parts[3]) : nil
            if let index = self.uninstalled.firstIndex(where: {
                $0.topic == parts[0] && $0.timestamp == timestamp && $0.reregisteredAt == again
            }) {
                self.uninstalled[index].tokens.append(parts[1])
            } else {
                self.uninstalled.append(
                    Uninstalled(topic: parts[0], tokens: [parts[1]], timestamp: timestamp, reregisteredAt: again)
                )
            }
        case "latency-ms": self.latencyMilliseconds = try Self.number(name, value)
        case "lost-fraction": self.lostFraction = try Self.fraction(name, value)
        case "jitter-ms": self.jitterMilliseconds = try Self.number(name, value)
        case "h2-429-rate": self.http2Faults.tooManyRequestsRate = try Self.fraction(name, value)
        case "h2-retry-after-s": self.http2Faults.retryAfterSeconds = try Self.number(name, value)
        case "h2-500-rate": self.http2Faults.internalServerErrorRate = try Self.fraction(name, value)
        case "h2-503-rate": self.http2Faults.serviceUnavailableRate = try Self.fraction(name, value)
        case "h2-goaway-after": self.http2Faults.goAwayAfterStreams = max(1, try Self.number(name, value))
        case "h2-shrink-after": self.http2Faults.shrinkAfterStreams = max(1, try Self.number(name, value))
        case "h2-shrink-to": self.http2Faults.shrinkTo = max(1, try Self.number(name, value))
        case "h2-restore-after": self.http2Faults.restoreAfterStreams = max(1, try Self.number(name, value))
        case "h2-answer-delay-ms": self.http2Faults.responseDelayMilliseconds = try Self.number(name, value)
        case "h2-token-start-one": self.http2Faults.tokenConnectionsStartWithOneStream = try Self.flag(name, value)
        case "h2-drop-to-one": self.http2Faults.dropToOneAfterRejection = try Self.flag(name, value)
        case "h2-goaway-rate": self.http2Faults.goAwayRate = try Self.fraction(name, value)
        case "h2-reset-rate": self.http2Faults.resetRate = try Self.fraction(name, value)
        case "h2-shrink-rate": self.http2Faults.shrinkRate = try Self.fraction(name, value)
        case "h2-shrink-for": self.http2Faults.shrinkForStreams = max(1, try Self.number(name, value))
        case "h2-burst-rate": self.http2Faults.errorBurstRate = try Self.fraction(name, value)
        case "h2-burst-length": self.http2Faults.errorBurstLength = max(1, try Self.number(name, value))
        default:
            throw SimulatorError(
                .invalidFaultPlan,
                "unknown fault option '\(name)'; known: \(Self.optionNames.joined(separator: ", "))"
            )
        }
    }

    private static func number<T: FixedWidthInteger>(_ name: String, _ value: String) throws(SimulatorError) -> T {
        guard let number = T(value), number >= 0 else {
            throw SimulatorError(.invalidFaultPlan, "\(name) needs a whole number ≥ 0, not '\(value)'")
        }
        return number
    }

    /// The plan's HTTP/2 faults, made when an option first names one.
    private var http2Faults: HTTP2EndpointConfiguration.Faults {
        get { self.http2 ?? HTTP2EndpointConfiguration.Faults() }
        set { self.http2 = newValue }
    }

    private static func flag(_ name: String, _ value: String) throws(SimulatorError) -> Bool {
        switch value {
        case "true", "on", "1": return true
        case "false", "off", "0": return false
        default: throw SimulatorError(.invalidFaultPlan, "\(name) needs true or false, not '\(value)'")
        }
    }

    private static func fraction(_ name: String, _ value: String) throws(SimulatorError) -> Double {
        guard let number = Double(value), number >= 0, number <= 1 else {
            throw SimulatorError(.invalidFaultPlan, "\(name) needs a probability between 0 and 1, not '\(value)'")
        }
        return number
    }
}
