/// Apple's gateways for both provider interfaces side by side, and the parsing of a `HOST:PORT` address.
public struct GatewayAddress: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    /// Which service of Apple's a named gateway means.
    public enum Service: Sendable {
        /// The binary provider interface.
        case binary
        /// The binary interface's feedback service.
        case feedback
        /// The HTTP/2 provider API.
        case http2
    }

    /// Apple's production gateway for `service`.
    public static func production(_ service: Service) -> GatewayAddress {
        switch service {
        case .binary: GatewayAddress(host: "gateway.push.apple.com", port: 2195)
        case .feedback: GatewayAddress(host: "feedback.push.apple.com", port: 2196)
        case .http2: GatewayAddress(host: "api.push.apple.com", port: 443)
        }
    }

    /// Apple's development (sandbox) gateway for `service`.
    public static func sandbox(_ service: Service) -> GatewayAddress {
        switch service {
        case .binary: GatewayAddress(host: "gateway.sandbox.push.apple.com", port: 2195)
        case .feedback: GatewayAddress(host: "feedback.sandbox.push.apple.com", port: 2196)
        case .http2: GatewayAddress(host: "api.sandbox.push.apple.com", port: 443)
        }
    }

    /// `production`, `sandbox`, `HOST:PORT` or `[IPv6]:PORT`; nil for anything else.
    public init?(parsing text: String, for service: Service) {
        switch text {
        case "production":
            self = .production(service)
        case "sandbox":
            self = .sandbox(service)
        default:
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
                (1...65535).contains(port)
            else { return nil }
            var host = String(text[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { return nil }
            self.init(host: host, port: port)
        }
    }
}
