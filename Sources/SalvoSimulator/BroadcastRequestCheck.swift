import APNSWire
import Foundation

/// The checks APNs makes on a broadcast (`POST /4/broadcasts/apps/<app>` on the push hosts), in order, as a pure
/// function: path and method, the app, credentials and broadcast turned on (`BroadcastAccess`), the channel, the
/// required headers (`apns-push-type`, `apns-priority`, `apns-expiration` against the channel's policy), then the
/// payload (at most 5,120 bytes, JSON, an update or end of a Live Activity: a broadcast cannot start one). The
/// publishing budget is the registry's (`ChannelRegistry`).
enum BroadcastRequestCheck {
    static let pathPrefix = "/4/broadcasts/apps/"

    struct Passed: Sendable, Equatable {
        var app: String
        var channelID: String
        var policy: ChannelStoragePolicy
        var priority: UInt8
        /// UNIX seconds; 0: one attempt, nothing stored.
        var expiration: UInt32
        var update: Update
    }

    /// What a broadcast says, for the ledger.
    struct Update: Sendable, Equatable {
        /// `aps.timestamp`, UNIX seconds.
        var timestamp: Int64
        /// `aps.event`: `update` or `end`.
        var event: String
        /// The payload's bytes, hashed.
        var payloadDigest: UInt64
        /// The payload without `aps.timestamp`, keys sorted, hashed: the update itself, whenever it is stamped, so
        /// that the same update sent again with a fresh timestamp is known for the same update.
        var updateDigest: UInt64
    }

    static func check(
        method: String?,
        path: String?,
        fields: [(name: String, value: String)],
        credentials: HTTP2RequestCheck.Credentials,
        enabledApps: Set<String>,
        policyOf: (_ channelID: String, _ app: String) -> ChannelStoragePolicy?,
        payload: [UInt8],
        payloadBytes: Int
    ) -> Result<Passed, APNSReason> {
        guard let path, path.hasPrefix(Self.pathPrefix) else { return .failure(.badPath) }
        let app = String(path.dropFirst(Self.pathPrefix.count))
        guard !app.isEmpty, !app.contains("/") else { return .failure(.badPath) }
        guard method == "POST" else { return .failure(.methodNotAllowed) }
        if let apnsID = fields.first(where: { $0.name == "apns-id" })?.value,
            !APNSRequestHeaders.isCanonicalUUID(apnsID)
        {
            return .failure(.badMessageId)
        }
        if let refusal = BroadcastAccess.refusal(app: app, credentials: credentials, enabledApps: enabledApps) {
            return .failure(refusal)
        }
        let channelID: String
        switch BroadcastAccess.channelID(in: fields) {
        case .failure(let reason): return .failure(reason)
        case .success(let id): channelID = id
        }
        guard let policy = policyOf(channelID, app) else { return .failure(BroadcastRules.channelNotRegistered) }
        func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }
        guard let pushType = field("apns-push-type") else { return .failure(BroadcastRules.missingPushType) }
        guard BroadcastRules.isLiveActivity(pushType) else { return .failure(.invalidPushType) }
        guard let priorityText = field("apns-priority"), BroadcastRules.isBroadcastPriority(priorityText),
            let priority = UInt8(priorityText)
        else {
            return .failure(.badPriority)
        }
        guard let expirationText = field("apns-expiration"), let expiration = UInt32(expirationText) else {
            return .failure(.badExpirationDate)
        }
        // Only a channel that stores a message can keep one until a later expiry.
        if expiration != 0 && policy == .noMessageStored { return .failure(.badExpirationDate) }
        guard payloadBytes > 0 else { return .failure(.payloadEmpty) }
        guard payloadBytes <= BroadcastRules.maximumPayloadBytes else { return .failure(.payloadTooLarge) }
        return Self.update(payload).map {
            Passed(
                app: app,
                channelID: channelID,
                policy: policy,
                priority: priority,
                expiration: expiration,
                update: $0
            )
        }
    }

    /// Reads a Live Activity update: JSON (BadRequestPayload otherwise) whose `aps` has a numeric `timestamp` and an
    /// `event` of `update` or `end` (`BroadcastRules.notAnUpdateReason` otherwise, `start` included).
    static func update(_ payload: [UInt8]) -> Result<Update, APNSReason> {
        guard var object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
            return .failure(BroadcastRules.badRequestPayload)
        }
        guard var aps = object["aps"] as? [String: Any], let event = aps["event"] as? String,
            event == "update" || event == "end", let stamp = aps["timestamp"] as? NSNumber,
            !BroadcastAccess.isBoolean(stamp)
        else {
            return .failure(BroadcastRules.notAnUpdateReason)
        }
        aps.removeValue(forKey: "timestamp")
        object["aps"] = aps
        let canonical = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(payload)
        return .success(
            Update(
                timestamp: stamp.int64Value,
                event: event,
                payloadDigest: payload.withUnsafeBytes { TokenHash.digest($0) },
                updateDigest: canonical.withUnsafeBytes { TokenHash.digest($0) }
            )
        )
    }
}
