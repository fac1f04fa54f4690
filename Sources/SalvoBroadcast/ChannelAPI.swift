import APNSWire
import Foundation

/// Apple's two environments for channels and broadcasts. A channel works only in the environment that created it.
public enum BroadcastEnvironment: String, Sendable, CaseIterable, Codable {
    case development
    case production

    /// The channel management service: its own hosts and ports, not the push hosts.
    public var managementHost: String {
        switch self {
        case .development: "api-manage-broadcast.sandbox.push.apple.com"
        case .production: "api-manage-broadcast.push.apple.com"
        }
    }

    /// 2195 in development, 2196 in production.
    public var managementPort: Int {
        switch self {
        case .development: 2195
        case .production: 2196
        }
    }

    /// The push host that takes `POST /4/broadcasts/apps/<bundle id>` (the ordinary push hosts, port 443).
    public var pushHost: String {
        switch self {
        case .development: "api.sandbox.push.apple.com"
        case .production: "api.push.apple.com"
        }
    }

    public var pushPort: Int { 443 }
}

/// A channel's `message-storage-policy`, chosen at creation and never changed: `0` keeps no message for an
/// offline device (frequent updates, a larger publishing budget), `1` keeps the most recent one for up to 8 hours.
public enum MessageStoragePolicy: Int, Sendable, CaseIterable, Codable {
    case none = 0
    case mostRecent = 1

    /// The name on the command line and in an inventory: `none` or `most-recent`.
    public var name: String {
        switch self {
        case .none: "none"
        case .mostRecent: "most-recent"
        }
    }

    /// `none`, `most-recent`, or the number Apple uses (`0`, `1`).
    public init?(name: String) {
        switch name.lowercased() {
        case "none", "0": self = .none
        case "most-recent", "1": self = .mostRecent
        default: return nil
        }
    }
}

/// The most channels Apple keeps per app in each environment; creating one more answers
/// `400 CannotCreateChannelConfig`.
public let channelLimitPerApp = 10_000

/// One request on an HTTP/2 stream: method, path, the headers besides the pseudo-headers, the body.
public struct HTTP2Request: Hashable, Sendable {
    public var method: String
    public var path: String
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Hashable, Sendable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(method: String, path: String, headers: [Header] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// The value of header `name` (lowercase), if present.
    public func header(_ name: String) -> String? { self.headers.first { $0.name == name }?.value }
}

/// An answer: the status, the headers, the body.
public struct HTTP2Response: Hashable, Sendable {
    public var status: Int
    public var headers: [HTTP2Request.Header]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTP2Request.Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { self.headers.first { $0.name == name }?.value }

    /// The failure this answer says, for a status other than `expected`: the body's `reason` (or the status alone
    /// when the body has none), the `apns-request-id` to quote.
    func failure(unless expected: Int) -> ChannelFailure? {
        guard self.status != expected else { return nil }
        let reason = APNSErrorBody(jsonBytes: self.body)?.reason.rawValue ?? "HTTP \(self.status)"
        return ChannelFailure(status: self.status, reason: reason, requestID: self.header("apns-request-id"))
    }
}

/// A request the service refused (status and Apple's reason) or one that got no answer (status nil).
public struct ChannelFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The HTTP status; nil when no answer came (timeout, connection lost).
    public var status: Int?
    /// Apple's `reason` (`CannotCreateChannelConfig`, `BadChannelId`, …) or what went wrong on the way.
    public var reason: String
    /// The `apns-request-id` the answer carried.
    public var requestID: String?

    public init(status: Int?, reason: String, requestID: String? = nil) {
        self.status = status
        self.reason = reason
        self.requestID = requestID
    }

    public var description: String {
        let status = self.status.map { "\($0) " } ?? ""
        return status + self.reason + (self.requestID.map { " (apns-request-id \($0))" } ?? "")
    }

    /// 429 and 5xx: the same request may succeed later.
    public var isRetryable: Bool {
        guard let status else { return false }
        return status == 429 || status == 500 || status == 503
    }

    /// A refusal of the app or the credentials rather than of one channel or row (broadcast not enabled for the
    /// app, a certificate or key for another topic, a bad path or credentials; any 403): every other request of
    /// the job would be refused the same way, so a job stops at the first one and leaves its other rows unsent.
    public var isAppWide: Bool {
        self.status == 403 || Self.appWideReasons.contains(self.reason)
    }

    /// Apple's reasons that refuse the app or the credentials, whatever the request.
    public static let appWideReasons: Set<String> = [
        "FeatureNotEnabled", "TopicMismatch", "TopicDisallowed", "BadPath", "MethodNotAllowed", "BadCertificate",
        "BadCertificateEnvironment", "MissingProviderToken", "ExpiredProviderToken", "InvalidProviderToken",
        "Forbidden",
    ]
}

/// The channel management API as requests and answers (no I/O): `POST /1/apps/<bundle id>/channels` creates,
/// `GET` and `DELETE` on the same path read and delete the channel named in the `apns-channel-id` request header,
/// `GET /1/apps/<bundle id>/all-channels` lists every channel of the app.
public struct ChannelManagement: Hashable, Sendable {
    public let bundleID: String

    /// Why `bundleID` cannot be an app's bundle id, or nil when it can: Apple's characters are ASCII letters,
    /// digits, hyphens and periods, so nothing of it is read as a URL's `?`, `#`, `%` or `/` in the request's path.
    public static func problem(bundleID: String) -> String? {
        if bundleID.isEmpty { return "the bundle id is empty" }
        for scalar in bundleID.unicodeScalars {
            let allowed =
                ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                || scalar == "-" || scalar == "."
            if !allowed {
                return "'\(bundleID)' holds '\(scalar)': a bundle id is ASCII letters, digits, hyphens and periods"
            }
        }
        if bundleID.hasPrefix(".") || bundleID.hasSuffix(".") || bundleID.contains("..") {
            return "'\(bundleID)' has an empty part between its periods"
        }
        return nil
    }

    public init(bundleID: String) {
        self.bundleID = bundleID
    }

    private var channelsPath: String { "/1/apps/\(self.bundleID)/channels" }

    /// Creates a channel: 201 with the new id in the `apns-channel-id` response header.
    public func create(policy: MessageStoragePolicy, requestID: String? = nil) -> HTTP2Request {
        let body = #"{"message-storage-policy":\#(policy.rawValue),"push-type":"LiveActivity"}"#
        return HTTP2Request(
            method: "POST",
            path: self.channelsPath,
            headers: Self.requestIDHeader(requestID) + [.init("content-type", "application/json")],
            body: Array(body.utf8)
        )
    }

    /// Reads one channel's settings: 200 with `{"message-storage-policy":…,"push-type":"LiveActivity"}`.
    public func read(channelID: String, requestID: String? = nil) -> HTTP2Request {
        HTTP2Request(
            method: "GET",
            path: self.channelsPath,
            headers: Self.requestIDHeader(requestID) + [.init("apns-channel-id", channelID)]
        )
    }

    /// Deletes one channel: 204. The id is never issued again.
    public func delete(channelID: String, requestID: String? = nil) -> HTTP2Request {
        HTTP2Request(
            method: "DELETE",
            path: self.channelsPath,
            headers: Self.requestIDHeader(requestID) + [.init("apns-channel-id", channelID)]
        )
    }

    /// Lists every channel of the app: 200 with `{"channels":["<id>",…]}`.
    public func list(requestID: String? = nil) -> HTTP2Request {
        HTTP2Request(
            method: "GET",
            path: "/1/apps/\(self.bundleID)/all-channels",
            headers: Self.requestIDHeader(requestID)
        )
    }

    private static func requestIDHeader(_ requestID: String?) -> [HTTP2Request.Header] {
        requestID.map { [.init("apns-request-id", $0)] } ?? []
    }

    /// The id of a channel just created, from a 201's `apns-channel-id` header.
    public static func createdChannel(_ response: HTTP2Response) -> Result<String, ChannelFailure> {
        if let failure = response.failure(unless: 201) { return .failure(failure) }
        guard let id = response.header("apns-channel-id"), ChannelID.isWellFormed(id) else {
            return .failure(
                ChannelFailure(
                    status: 201,
                    reason: "201 without a well-formed apns-channel-id header",
                    requestID: response.header("apns-request-id")
                )
            )
        }
        return .success(id)
    }

    /// The storage policy of a channel read with `read(channelID:)`.
    public static func readPolicy(_ response: HTTP2Response) -> Result<MessageStoragePolicy, ChannelFailure> {
        if let failure = response.failure(unless: 200) { return .failure(failure) }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        guard let number = object?["message-storage-policy"] as? Int,
            let policy = MessageStoragePolicy(rawValue: number)
        else {
            return .failure(ChannelFailure(status: 200, reason: "200 without a message-storage-policy of 0 or 1"))
        }
        return .success(policy)
    }

    /// The channel ids of an `all-channels` answer.
    public static func channels(_ response: HTTP2Response) -> Result<[String], ChannelFailure> {
        if let failure = response.failure(unless: 200) { return .failure(failure) }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        guard let ids = object?["channels"] as? [String] else {
            return .failure(ChannelFailure(status: 200, reason: "200 without a \"channels\" array of strings"))
        }
        return .success(ids)
    }

    /// Whether a delete succeeded (204).
    public static func deleted(_ response: HTTP2Response) -> Result<Void, ChannelFailure> {
        if let failure = response.failure(unless: 204) { return .failure(failure) }
        return .success(())
    }
}

/// Channel ids as APNs issues them: base64 of bytes of no fixed length.
public enum ChannelID {
    /// Whether `id` is non-empty standard base64 (padding optional) that decodes, at most 256 characters: what a
    /// header may carry and APNs could have issued. Anything else would be answered `BadChannelId`.
    public static func isWellFormed(_ id: String) -> Bool { ChannelIDFormat.isWellFormed(id) }
}
