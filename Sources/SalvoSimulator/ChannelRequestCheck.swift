import APNSWire
import Foundation

/// The checks the channel management service makes on a request, in order, as pure functions: path, method, the
/// app (no push-type suffix), the credentials against the app, broadcast turned on for it, then what the operation
/// needs (the `apns-channel-id` header, the create body). The first failure is the answer; whether the channel
/// exists, and the per-app limit, are the registry's to say (`ChannelRegistry`).
enum ChannelRequestCheck {
    enum Operation: Sendable, Equatable {
        case create(app: String, policy: ChannelStoragePolicy)
        case read(app: String, channelID: String)
        case delete(app: String, channelID: String)
        case list(app: String)
    }

    static func check(
        method: String?,
        path: String?,
        fields: [(name: String, value: String)],
        credentials: HTTP2RequestCheck.Credentials,
        enabledApps: Set<String>,
        body: [UInt8],
        bodyBytes: Int
    ) -> Result<Operation, APNSReason> {
        guard let (app, resource) = Self.route(path) else { return .failure(.badPath) }
        let allowed = resource == "channels" ? ["POST", "GET", "DELETE"] : ["GET"]
        guard let method, allowed.contains(method) else { return .failure(.methodNotAllowed) }
        if let refusal = BroadcastAccess.refusal(app: app, credentials: credentials, enabledApps: enabledApps) {
            return .failure(refusal)
        }
        if resource == "all-channels" { return .success(.list(app: app)) }
        if method == "POST" {
            return Self.createBody(body, bodyBytes: bodyBytes).map { .create(app: app, policy: $0) }
        }
        switch BroadcastAccess.channelID(in: fields) {
        case .failure(let reason): return .failure(reason)
        case .success(let id):
            return .success(method == "GET" ? .read(app: app, channelID: id) : .delete(app: app, channelID: id))
        }
    }

    /// `/1/apps/<app>/channels` or `/1/apps/<app>/all-channels`: the app and the last segment.
    static func route(_ path: String?) -> (app: String, resource: String)? {
        guard let path, path.hasPrefix("/1/apps/") else { return nil }
        let parts = path.dropFirst("/1/apps/".count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == "channels" || parts[1] == "all-channels" else { return nil }
        let app = String(parts[0])
        guard !app.isEmpty else { return nil }
        return (app, String(parts[1]))
    }

    /// The create body: a JSON object with `message-storage-policy` (0 or 1) and `push-type` (`LiveActivity`), and
    /// nothing else.
    static func createBody(_ body: [UInt8], bodyBytes: Int) -> Result<ChannelStoragePolicy, APNSReason> {
        guard bodyBytes > 0 else { return .failure(.payloadEmpty) }
        guard bodyBytes <= BroadcastRules.maximumCreateBodyBytes else { return .failure(.payloadTooLarge) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return .failure(BroadcastRules.badRequestPayload)
        }
        let known: Set<String> = ["message-storage-policy", "push-type"]
        guard object.keys.allSatisfy(known.contains) else { return .failure(BroadcastRules.badRequestParams) }
        guard let number = object["message-storage-policy"] as? NSNumber, !BroadcastAccess.isBoolean(number),
            number.doubleValue == number.doubleValue.rounded(),
            let policy = ChannelStoragePolicy(rawValue: number.intValue)
        else {
            return .failure(BroadcastRules.badStoragePolicyReason)
        }
        guard let pushType = object["push-type"] else { return .failure(BroadcastRules.missingPushType) }
        guard let text = pushType as? String, BroadcastRules.isLiveActivity(text) else {
            return .failure(.invalidPushType)
        }
        return .success(policy)
    }
}

/// What the channel management and broadcast services check alike.
enum BroadcastAccess {
    /// Why `app` may not be managed or broadcast to with `credentials`; nil when it may. A push-type suffix is
    /// TopicDisallowed; an app the certificate or the token's key does not cover is TopicMismatch (403); an app
    /// without broadcast is FeatureNotEnabled.
    static func refusal(
        app: String,
        credentials: HTTP2RequestCheck.Credentials,
        enabledApps: Set<String>
    ) -> APNSReason? {
        guard PeerTopic.isBundleIdentifier(app) else { return .badPath }
        if BroadcastRules.hasPushTypeSuffix(app) { return .topicDisallowed }
        switch credentials {
        case .none:
            return .missingProviderToken
        case .certificate(let peer):
            guard let topic = peer.topic else { return .badCertificate }
            if topic != app { return BroadcastRules.topicMismatch }
        case .token(.failure(let reason)):
            return reason
        case .token(.success(let accepted)):
            if !accepted.topics.isEmpty && !accepted.topics.contains(app) { return BroadcastRules.topicMismatch }
        }
        return enabledApps.contains(app) ? nil : BroadcastRules.featureNotEnabled
    }

    /// The `apns-channel-id` header: MissingChannelId without it, BadChannelId when it cannot be an id.
    static func channelID(in fields: [(name: String, value: String)]) -> Result<String, APNSReason> {
        guard let id = fields.first(where: { $0.name == "apns-channel-id" })?.value else {
            return .failure(BroadcastRules.missingChannelId)
        }
        return ChannelBook.isWellFormed(id) ? .success(id) : .failure(BroadcastRules.badChannelId)
    }

    /// JSONSerialization reads `true` as an NSNumber too (of type `c`; JSON numbers come as `q` or `d`).
    static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}
