/// What Apple documents about `apns-push-type` against `apns-topic` and `apns-priority`, as one table the
/// client checks before it connects and the simulator checks per request.
///
/// Sources:
/// - Apple, "Sending notification requests to APNs", the `apns-push-type` list
///   (developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns): the topic of
///   each push type (alert and background: the bundle id; voip `.voip`; complication `.complication`;
///   fileprovider `.pushkit.fileprovider`; location `.location-query`; liveactivity `.push-type.liveactivity`;
///   pushtotalk `.voip-ptt`; widgets `.push-type.widgets`; controls `.push-type.controls`; mdm: the UID of the
///   MDM certificate), and the priorities: alert "10 … otherwise use 5"; background "Always use priority 5. Using
///   priority 10 is an error."; location "10 … otherwise, use 5". The same page, `apns-priority`: "If you omit
///   this header, APNs sets the notification priority to 10"; 1 puts the device's power first.
/// - Apple, "Starting and updating Live Activities with ActivityKit push notifications": Live Activity updates
///   go at priority 5 or 10 (10 counts against the activity's budget).
/// - Apple, "Creating a Push to Talk app": "Set the APNs priority to 10 to request immediate delivery".
///
/// Which reason a topic that does not fit the push type earns is not documented. Reported answers are used:
/// - a push type that needs a suffix, sent to the topic without it (voip to the bare bundle id), earns
///   `DeviceTokenNotForTopic` (laravel-notification-channels/apn#88, edamov/pushok#108): a token that takes voip
///   pushes is registered for `<bundle id>.voip`, so the bare bundle id is a topic the token is not for;
/// - a topic that carries another push type's suffix (alert to `<bundle id>.voip`) earns `InvalidPushType`
///   (ostinelli/apnotic#87, sideshow/apns2#149): the topic is right, the push type is not.
/// A priority the push type does not take earns `BadPriority`, the one documented priority reason.
extension APNSPushType {
    /// What `apns-topic` must end with for this push type (`<bundle id><suffix>`); nil when the topic is the
    /// bundle id itself (alert, background) or named otherwise (mdm: the UID of the MDM certificate).
    public var requiredTopicSuffix: String? { Self.topicSuffixes[self] }

    /// The suffix of every push type that has one.
    public static let topicSuffixes: [APNSPushType: String] = [
        .voip: ".voip", .complication: ".complication", .fileProvider: ".pushkit.fileprovider",
        .location: ".location-query", .liveActivity: ".push-type.liveactivity", .pushToTalk: ".voip-ptt",
        .widgets: ".push-type.widgets", .controls: ".push-type.controls",
    ]

    /// The `apns-priority` values this push type takes, most urgent first. Push types whose documentation names
    /// no priority take every value the HTTP/2 API knows (10, 5, 1).
    public var allowedPriorities: [NotificationPriority] {
        switch self {
        case .background: [.powerConsiderate, .low]
        case .location, .liveActivity: [.immediate, .powerConsiderate]
        case .pushToTalk: [.immediate]
        default: [.immediate, .powerConsiderate, .low]
        }
    }

    /// Whether this push type takes `priority`; nil is the header left out, which APNs reads as 10.
    public func allows(_ priority: NotificationPriority?) -> Bool {
        self.allowedPriorities.contains(priority ?? .immediate)
    }

    /// The reason APNs answers a request of this push type to `topic` at `priority`, or nil when the push type
    /// rules allow it (other checks, such as whether the credentials cover the topic, are not made here).
    ///
    /// - Parameters:
    ///   - topic: the topic the notification goes to; nil skips the topic rule (the certificate names it).
    ///   - priority: the `apns-priority` value; nil is 10.
    ///   - bundleIdentifier: the app `topic` belongs to, when known. Then a topic that is the app plus another
    ///     push type's suffix is caught too; without it only a missing suffix is (a bundle id may itself end in
    ///     `.voip`).
    /// - Returns: `.deviceTokenNotForTopic` for a topic without the push type's suffix, `.invalidPushType` for a
    ///   topic with another push type's suffix, `.badPriority` for a priority the push type does not take.
    public func violation(
        topic: String?,
        priority: NotificationPriority?,
        bundleIdentifier: String? = nil
    ) -> APNSReason? {
        if let topic, self != .mdm, Self.known.contains(self) {
            let required = self.requiredTopicSuffix ?? ""
            if let bundleIdentifier, topic.hasPrefix(bundleIdentifier) {
                let rest = String(topic.dropFirst(bundleIdentifier.count))
                if rest != required && (rest.isEmpty || Self.suffixes.contains(rest)) {
                    return rest.isEmpty ? .deviceTokenNotForTopic : .invalidPushType
                }
            }
            if !required.isEmpty && !(topic.hasSuffix(required) && topic.utf8.count > required.utf8.count) {
                return .deviceTokenNotForTopic
            }
        }
        return self.allows(priority) ? nil : .badPriority
    }

    private static let suffixes = Set(topicSuffixes.values)

    /// The app `topic` belongs to among `bundleIdentifiers`: the one it equals, or the one it extends by a push
    /// type's suffix. Nil when it belongs to none.
    public static func bundleIdentifier(ofTopic topic: String, among bundleIdentifiers: Set<String>) -> String? {
        if bundleIdentifiers.contains(topic) { return topic }
        for suffix in Self.topicSuffixes.values where topic.hasSuffix(suffix) {
            let app = String(topic.dropLast(suffix.count))
            if bundleIdentifiers.contains(app) { return app }
        }
        return nil
    }
}

/// How a push type problem names what it is about: as `salvo send`'s options (`--push-type`, `--topic`,
/// `--priority`, which takes 10 or 5) or as the request's headers (`apns-push-type`, `apns-topic`, `apns-priority`).
public enum APNSPushTypeNaming: Sendable {
    case options
    case headers
}

/// A push type, topic and priority APNs would refuse for every request: the reason it would answer (nil for a push
/// type it does not know) and a sentence naming the rule, the one wording `send`, `check` and the HTTP/2 job share.
public struct APNSPushTypeProblem: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: APNSReason?
    public var message: String

    public var description: String { self.message }
}

extension APNSPushType {
    /// The priority a request of this push type goes with when none is chosen: 5 for background (10 is an
    /// error there), 10 otherwise (what APNs reads when the header is left out).
    public var defaultPriority: NotificationPriority { self == .background ? .powerConsiderate : .immediate }

    /// Whether APNs charges a notification of this push type at `priority` (nil: 10) against a budget, so that
    /// sending many throttles them: Live Activity updates at 10 (5 is not charged), widget reloads always.
    public func isBudgeted(at priority: NotificationPriority?) -> Bool {
        switch self {
        case .liveActivity: (priority ?? .immediate) == .immediate
        case .widgets: true
        default: false
        }
    }

    /// What APNs would refuse about this push type for every request with `topic` and `priority`: an unknown push
    /// type, or `violation(topic:priority:)`, as one sentence.
    ///
    /// - Parameters:
    ///   - topic: the topic; nil skips the topic rule (a certificate names it).
    ///   - priority: the priority; nil is the header left out (10).
    ///   - priorityIsDefault: whether the priority was not chosen but defaulted (said in the message).
    ///   - naming: options or headers.
    public func problem(
        topic: String?,
        priority: NotificationPriority?,
        priorityIsDefault: Bool = false,
        naming: APNSPushTypeNaming
    ) -> APNSPushTypeProblem? {
        let (type, topicName, priorityName) =
            switch naming {
            case .options: ("--push-type", "a --topic", "--priority")
            case .headers: ("apns-push-type", "an apns-topic", "apns-priority")
            }
        guard Self.known.contains(self) else {
            let known = Self.known.map(\.rawValue).sorted().joined(separator: ", ")
            return APNSPushTypeProblem(
                reason: nil,
                message: "\(type) \(self) is not one of APNs' push types (\(known))"
            )
        }
        guard let reason = self.violation(topic: topic, priority: priority) else { return nil }
        let sentence: String
        switch reason {
        case .deviceTokenNotForTopic:
            let suffix = self.requiredTopicSuffix ?? ""
            sentence =
                "\(type) \(self) needs \(topicName) ending in \(suffix) (<bundle id>\(suffix)), not \(topic ?? "")"
        case .badPriority:
            // `--priority` takes 10 or 5: the options name only those.
            let allowed = self.allowedPriorities.filter { naming == .headers || $0.isValidForBinary }
            let value = (priority ?? .immediate).rawValue
            sentence =
                "\(type) \(self) takes \(priorityName) \(allowed.map { String($0.rawValue) }.joined(separator: " or "))"
                + ", not \(value)\(priorityIsDefault ? " (the default)" : "")"
        default:
            sentence = "\(type) \(self) does not go with \(topicName.split(separator: " ").last!) \(topic ?? "")"
        }
        return APNSPushTypeProblem(
            reason: reason,
            message: sentence + ": APNs would answer \(reason) for every request"
        )
    }
}
