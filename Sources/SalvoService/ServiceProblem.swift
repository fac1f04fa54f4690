import APNSWire

/// An answer that is not a success, as RFC 9457 problem details: the status, a type naming the kind of problem,
/// a sentence for a person, and each refused field with its reason.
public struct ServiceProblem: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of problem the API answers with (the last part of `type`), each with its status.
    public struct Kind: Hashable, Sendable {
        public let slug: String
        public let status: Int
        public let title: String

        public static let badJSON = Kind(slug: "bad-json", status: 400, title: "The body is not JSON")
        public static let badRequest = Kind(slug: "bad-request", status: 400, title: "The request is malformed")
        public static let unauthorized = Kind(slug: "unauthorized", status: 401, title: "A valid API key is needed")
        public static let notFound = Kind(slug: "not-found", status: 404, title: "Not found")
        public static let methodNotAllowed = Kind(
            slug: "method-not-allowed",
            status: 405,
            title: "The method is not allowed here"
        )
        public static let payloadTooLarge = Kind(slug: "payload-too-large", status: 413, title: "The body is too large")
        public static let unsupportedMediaType = Kind(
            slug: "unsupported-media-type",
            status: 415,
            title: "The body must be application/json"
        )
        public static let idempotencyConflict = Kind(
            slug: "idempotency-conflict",
            status: 422,
            title: "The idempotency key was used with another body"
        )
        public static let invalidNotifications = Kind(
            slug: "invalid-notifications",
            status: 422,
            title: "No notification of the request can be sent"
        )
        public static let invalidCampaign = Kind(
            slug: "invalid-campaign",
            status: 422,
            title: "The campaign cannot be sent as given"
        )
        public static let campaignState = Kind(
            slug: "campaign-state",
            status: 409,
            title: "The campaign's state does not allow it"
        )
        public static let queueFull = Kind(slug: "queue-full", status: 429, title: "The queue is full")
        public static let insufficientStorage = Kind(
            slug: "insufficient-storage",
            status: 507,
            title: "The store has no room for it"
        )
        public static let unavailable = Kind(slug: "unavailable", status: 503, title: "The service is unavailable")
        public static let internalError = Kind(slug: "internal", status: 500, title: "The service failed")
    }

    public var kind: Kind
    public var detail: String
    public var errors: [FieldError]
    /// Seconds after which to try again (429, 503).
    public var retryAfter: Int?

    public init(_ kind: Kind, detail: String, errors: [FieldError] = [], retryAfter: Int? = nil) {
        self.kind = kind
        self.detail = detail
        self.errors = errors
        self.retryAfter = retryAfter
    }

    public init(_ kind: Kind, detail: String, field: String) {
        self.init(kind, detail: detail, errors: [FieldError(field: field, reason: detail)])
    }

    public var status: Int { self.kind.status }

    public var description: String { "\(self.kind.status) \(self.kind.slug): \(self.detail)" }

    /// The `type` URI of each kind.
    public static let typeBase = "https://salvo.dev/problems/"

    /// The problem as `application/problem+json`.
    public var json: [UInt8] {
        var members: [JSONMember] = [
            JSONMember("type", .string(Self.typeBase + self.kind.slug)),
            JSONMember("title", .string(self.kind.title)),
            JSONMember("status", .int(self.kind.status)),
            JSONMember("detail", .string(self.detail)),
        ]
        if !self.errors.isEmpty {
            members.append(
                JSONMember(
                    "errors",
                    .array(
                        self.errors.map {
                            .object([JSONMember("field", .string($0.field)), JSONMember("reason", .string($0.reason))])
                        }
                    )
                )
            )
        }
        return JSONValue.object(members).compactBytes
    }
}
