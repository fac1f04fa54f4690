/// A SETTINGS parameter's identifier (RFC 9113 §6.5.2), as the server-side framing reads and writes it. Unknown
/// identifiers are kept as their raw value: a receiver must ignore them, not refuse them.
public struct HTTP2SettingIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16

    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// `SETTINGS_HEADER_TABLE_SIZE`: the HPACK dynamic table the sender's decoder allows.
    public static let headerTableSize = HTTP2SettingIdentifier(rawValue: 0x1)
    /// `SETTINGS_ENABLE_PUSH`: 0 or 1; a client sends 0, a server never sends it.
    public static let enablePush = HTTP2SettingIdentifier(rawValue: 0x2)
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`: the streams the peer may open at once.
    public static let maxConcurrentStreams = HTTP2SettingIdentifier(rawValue: 0x3)
    /// `SETTINGS_INITIAL_WINDOW_SIZE`: every stream's initial flow-control window (at most 2^31 − 1).
    public static let initialWindowSize = HTTP2SettingIdentifier(rawValue: 0x4)
    /// `SETTINGS_MAX_FRAME_SIZE`: the largest frame payload the sender accepts.
    public static let maxFrameSize = HTTP2SettingIdentifier(rawValue: 0x5)
    /// `SETTINGS_MAX_HEADER_LIST_SIZE`: advisory limit on a header list's size.
    public static let maxHeaderListSize = HTTP2SettingIdentifier(rawValue: 0x6)

    public var description: String {
        switch self {
        case .headerTableSize: "HEADER_TABLE_SIZE"
        case .enablePush: "ENABLE_PUSH"
        case .maxConcurrentStreams: "MAX_CONCURRENT_STREAMS"
        case .initialWindowSize: "INITIAL_WINDOW_SIZE"
        case .maxFrameSize: "MAX_FRAME_SIZE"
        case .maxHeaderListSize: "MAX_HEADER_LIST_SIZE"
        default: "0x" + String(self.rawValue, radix: 16)
        }
    }
}
