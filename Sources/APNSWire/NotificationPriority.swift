/// When the push service should deliver a notification.
public struct NotificationPriority: RawRepresentable, Hashable, Sendable, Codable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// 10: deliver now. The notification must alert, sound or badge: a payload whose `aps` holds only
    /// `content-available` is an error at this priority.
    public static let immediate = NotificationPriority(rawValue: 10)
    /// 5: at a time that saves power on the device.
    public static let powerConsiderate = NotificationPriority(rawValue: 5)
    /// 1: prioritise the device's power over all else (HTTP/2 only).
    public static let low = NotificationPriority(rawValue: 1)

    /// Whether the binary interface (command 2) accepts this value.
    public var isValidForBinary: Bool { self.rawValue == 10 || self.rawValue == 5 }
    /// Whether the HTTP/2 API accepts this value.
    public var isValidForHTTP2: Bool { self.rawValue == 10 || self.rawValue == 5 || self.rawValue == 1 }
}
