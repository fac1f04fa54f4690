/// The status byte of an error response (`8|status|identifier`).
///
/// A value, not an error: reports count notifications by status. Codes this table does not know are kept
/// as they came, so a gateway that grows a new code is reported faithfully.
public struct ErrorStatus: RawRepresentable, Hashable, Sendable, Codable {
    public let rawValue: UInt8

    @inlinable
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public static let noErrors = ErrorStatus(rawValue: 0)
    public static let processingError = ErrorStatus(rawValue: 1)
    public static let missingDeviceToken = ErrorStatus(rawValue: 2)
    public static let missingTopic = ErrorStatus(rawValue: 3)
    public static let missingPayload = ErrorStatus(rawValue: 4)
    public static let invalidTokenSize = ErrorStatus(rawValue: 5)
    public static let invalidTopicSize = ErrorStatus(rawValue: 6)
    public static let invalidPayloadSize = ErrorStatus(rawValue: 7)
    public static let invalidToken = ErrorStatus(rawValue: 8)
    /// The gateway is closing the connection for maintenance; the identifier is the last notification it
    /// accepted, and everything after it must be resent on a new connection.
    public static let shutdown = ErrorStatus(rawValue: 10)
    /// "None (unknown)" in the gateway's own table.
    public static let unknown = ErrorStatus(rawValue: 255)

    /// The gateway's name for the code, or `status N` for codes the table does not list.
    public var name: String {
        switch self.rawValue {
        case 0: "no errors encountered"
        case 1: "processing error"
        case 2: "missing device token"
        case 3: "missing topic"
        case 4: "missing payload"
        case 5: "invalid token size"
        case 6: "invalid topic size"
        case 7: "invalid payload size"
        case 8: "invalid token"
        case 10: "shutdown"
        case 255: "none (unknown)"
        default: "status \(self.rawValue)"
        }
    }
}

extension ErrorStatus {
    /// The status as a reason name, the key reports count refusals under for both protocols (HTTP/2 reasons
    /// are names of this shape: `BadDeviceToken`).
    public var reasonName: String {
        switch self.rawValue {
        case 0: "NoErrorsEncountered"
        case 1: "ProcessingError"
        case 2: "MissingDeviceToken"
        case 3: "MissingTopic"
        case 4: "MissingPayload"
        case 5: "InvalidTokenSize"
        case 6: "InvalidTopicSize"
        case 7: "InvalidPayloadSize"
        case 8: "InvalidToken"
        case 10: "Shutdown"
        case 255: "Unknown"
        default: "Status\(self.rawValue)"
        }
    }
}

extension ErrorStatus: CustomStringConvertible {
    public var description: String { "\(self.rawValue) (\(self.name))" }
}
