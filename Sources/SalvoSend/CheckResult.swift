/// One line of `salvo check`: what was checked, whether a send would start with it, and why.
public struct CheckResult: Hashable, Sendable, Codable {
    /// How a check came out.
    public enum Status: String, Hashable, Sendable, Codable {
        /// Nothing to fix.
        case ok
        /// A send would start, but something needs attention soon (a certificate that expires within 30 days).
        case warning
        /// A send would not start, or every row would be refused.
        case fail
    }

    /// What was checked (`certificate`, `expiry`, `topic`, `payload`, `tokens`, `handshake`, …).
    public var name: String
    public var status: Status
    /// What was found, or what is wrong and what to do: names the file and the value.
    public var detail: String

    public init(_ name: String, _ status: Status, _ detail: String) {
        self.name = name
        self.status = status
        self.detail = detail
    }

    public static func ok(_ name: String, _ detail: String) -> CheckResult { CheckResult(name, .ok, detail) }
    public static func warning(_ name: String, _ detail: String) -> CheckResult { CheckResult(name, .warning, detail) }
    public static func fail(_ name: String, _ detail: String) -> CheckResult { CheckResult(name, .fail, detail) }
}

extension Array where Element == CheckResult {
    /// Whether a send would start: no check failed (warnings do not stop a send).
    public var wouldStart: Bool { !self.contains { $0.status == .fail } }
}
