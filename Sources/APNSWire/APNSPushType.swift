/// The `apns-push-type` header of the HTTP/2 API. Unknown values are kept, so newer types pass through.
public struct APNSPushType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public static let alert = APNSPushType(rawValue: "alert")
    public static let background = APNSPushType(rawValue: "background")
    public static let voip = APNSPushType(rawValue: "voip")
    public static let location = APNSPushType(rawValue: "location")
    public static let complication = APNSPushType(rawValue: "complication")
    public static let fileProvider = APNSPushType(rawValue: "fileprovider")
    public static let mdm = APNSPushType(rawValue: "mdm")
    public static let liveActivity = APNSPushType(rawValue: "liveactivity")
    public static let pushToTalk = APNSPushType(rawValue: "pushtotalk")
    public static let widgets = APNSPushType(rawValue: "widgets")
    public static let controls = APNSPushType(rawValue: "controls")

    /// The push types the API documents.
    public static let known: Set<APNSPushType> = [
        .alert, .background, .voip, .location, .complication, .fileProvider, .mdm, .liveActivity, .pushToTalk,
        .widgets, .controls,
    ]

    /// The payload limit for this push type: VoIP notifications may be larger.
    public var payloadLimit: PayloadLimit { self == .voip ? .http2VoIP : .http2 }

    public var description: String { self.rawValue }
}
