/// The largest payload a delivery format accepts, in bytes of compact JSON.
public struct PayloadLimit: Hashable, Sendable, CustomStringConvertible {
    public let bytes: Int
    public let name: String

    public init(bytes: Int, name: String) {
        self.bytes = bytes
        self.name = name
    }

    /// 256 bytes: commands 0 and 1 (and every format before iOS 8).
    public static let legacy = PayloadLimit(bytes: 256, name: "binary commands 0 and 1")
    /// 2048 bytes: command 2.
    public static let binary = PayloadLimit(bytes: 2048, name: "binary command 2")
    /// 4096 bytes: the HTTP/2 API.
    public static let http2 = PayloadLimit(bytes: 4096, name: "HTTP/2")
    /// 5120 bytes: VoIP notifications over HTTP/2.
    public static let http2VoIP = PayloadLimit(bytes: 5120, name: "HTTP/2 VoIP")

    public var description: String { "\(self.bytes) bytes (\(self.name))" }
}
