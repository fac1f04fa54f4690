/// The command byte that opens a notification frame of the binary interface.
public enum FrameCommand: UInt8, Hashable, Sendable, CaseIterable, Codable {
    /// Command 0: token and payload only. No identifier, so a failure closes the connection silently.
    case simple = 0
    /// Command 1: adds an identifier and an expiry; payload at most 256 bytes.
    case enhanced = 1
    /// Command 2: a frame of items (token, payload, identifier, expiry, priority); payload at most 2048 bytes.
    case framed = 2

    /// The largest payload the gateway accepts in this format.
    public var payloadLimit: PayloadLimit {
        switch self {
        case .simple, .enhanced: .legacy
        case .framed: .binary
        }
    }

    /// Whether frames of this command carry an identifier (and so can be named in an error response).
    public var hasIdentifier: Bool { self != .simple }
}
