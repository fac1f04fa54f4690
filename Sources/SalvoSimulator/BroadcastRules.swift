import APNSWire

/// The reasons and limits of the broadcast and channel management APIs, and every choice their documentation leaves
/// open, in one place.
enum BroadcastRules {
    // Reasons the device API does not have (status 400 unless said).
    static let featureNotEnabled = APNSReason(rawValue: "FeatureNotEnabled")
    static let missingChannelId = APNSReason(rawValue: "MissingChannelId")
    static let badChannelId = APNSReason(rawValue: "BadChannelId")
    static let channelNotRegistered = APNSReason(rawValue: "ChannelNotRegistered")
    static let badRequestParams = APNSReason(rawValue: "BadRequestParams")
    static let badRequestPayload = APNSReason(rawValue: "BadRequestPayload")
    static let missingPushType = APNSReason(rawValue: "MissingPushType")
    static let cannotCreateChannelConfig = APNSReason(rawValue: "CannotCreateChannelConfig")
    /// 403: the app in the path is not covered by the certificate or the provider token's key.
    static let topicMismatch = APNSReason(rawValue: "TopicMismatch")

    /// The status each reason comes with on these APIs: the broadcast reasons, then the device API's table.
    static func status(of reason: APNSReason) -> Int {
        if reason == Self.topicMismatch { return 403 }
        if Self.badRequestReasons.contains(reason) { return 400 }
        return reason.status ?? 400
    }

    private static let badRequestReasons: Set<APNSReason> = [
        featureNotEnabled, missingChannelId, badChannelId, channelNotRegistered, badRequestParams, badRequestPayload,
        missingPushType, cannotCreateChannelConfig,
    ]

    /// The only channel push type. APNs documents `LiveActivity`; node-apn sends `liveactivity`, and whether APNs
    /// takes either spelling is unconfirmed: the simulator takes any case.
    static let channelPushType = "LiveActivity"

    /// Whether `value` names the channel push type (create body `push-type`, broadcast `apns-push-type`).
    static func isLiveActivity(_ value: String) -> Bool {
        value.lowercased() == "liveactivity"
    }

    /// A create body without `message-storage-policy`, or with a value other than 0 and 1. One codebase reports an
    /// undocumented `MissingChannelQueueSize` for it; the documented reason for a bad attribute is used.
    static let badStoragePolicyReason = Self.badRequestParams

    /// A broadcast that would start a Live Activity (`aps.event` is `start`), or whose payload lacks the update's
    /// `aps.timestamp` and `aps.event`: APNs documents no reason of its own for it.
    static let notAnUpdateReason = Self.badRequestPayload

    /// Broadcast payloads: at most 5 KB, uncompressed.
    static let maximumPayloadBytes = 5120
    /// A create body is a few dozen bytes; anything this long is refused as too large.
    static let maximumCreateBodyBytes = 5120
    /// A stored broadcast waits at most 8 hours.
    static let maximumStorageSeconds: UInt32 = 8 * 3600
    /// The longest channel id text accepted before it is "too long" (BadChannelId).
    static let maximumChannelIdLength = 64

    /// The priorities a broadcast takes: 10, 5 and 1.
    static func isBroadcastPriority(_ value: String) -> Bool {
        value == "10" || value == "5" || value == "1"
    }

    /// Whether `app` ends in a push type's topic suffix (`.push-type.liveactivity`, `.voip`, …): broadcasts and
    /// channels name the bare bundle id (TopicDisallowed otherwise).
    static func hasPushTypeSuffix(_ app: String) -> Bool {
        APNSPushType.topicSuffixes.values.contains { app.hasSuffix($0) && app.utf8.count > $0.utf8.count }
    }
}
