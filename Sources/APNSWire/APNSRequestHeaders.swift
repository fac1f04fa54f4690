/// The `apns-*` headers of an HTTP/2 request (the path, `/3/device/<hex token>`, carries the token).
///
/// `fields(authorization:)` gives the header list a client sends; `init(fields:)` is the server side: it
/// reads a received header list and throws the reason the service answers for the first bad header.
public struct APNSRequestHeaders: Hashable, Sendable {
    public var pushType: APNSPushType?
    /// `apns-id`: a lowercase UUID (8-4-4-4-12); the service makes one when absent.
    public var id: String?
    /// `apns-expiration`: UNIX seconds; 0 = try once, do not store.
    public var expiration: UInt32?
    public var priority: NotificationPriority?
    /// `apns-topic`: the bundle id (required with token authentication).
    public var topic: String?
    /// `apns-collapse-id`: at most 64 bytes.
    public var collapseID: String?

    /// The longest collapse id the service accepts, in bytes.
    public static let maximumCollapseIDBytes = 64

    /// Makes the headers, checking what a client can check before sending.
    ///
    /// - Throws: `.badCollapseId` for a collapse id over 64 bytes, `.badMessageId` for an id that is not a
    ///   lowercase UUID, `.badPriority` for a priority other than 10, 5 or 1.
    public init(
        pushType: APNSPushType? = nil,
        id: String? = nil,
        expiration: UInt32? = nil,
        priority: NotificationPriority? = nil,
        topic: String? = nil,
        collapseID: String? = nil
    ) throws(APNSReason) {
        if let collapseID, collapseID.utf8.count > Self.maximumCollapseIDBytes { throw .badCollapseId }
        if let id, !Self.isCanonicalUUID(id) { throw .badMessageId }
        if let priority, !priority.isValidForHTTP2 { throw .badPriority }
        self.pushType = pushType
        self.id = id
        self.expiration = expiration
        self.priority = priority
        self.topic = topic
        self.collapseID = collapseID
    }

    /// The header fields to send, in a fixed order; `authorization` is `bearer <JWT>` with token auth.
    public func fields(authorization: String? = nil) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        self.forEachField(authorization: authorization) { fields.append(($0, $1)) }
        return fields
    }

    /// Calls `body` with each field `fields(authorization:)` gives, in its order, for a caller that keeps them in
    /// a collection of its own.
    @inlinable
    public func forEachField(authorization: String? = nil, _ body: (_ name: String, _ value: String) -> Void) {
        if let authorization { body("authorization", authorization) }
        if let pushType { body("apns-push-type", pushType.rawValue) }
        if let id { body("apns-id", id) }
        if let expiration { body("apns-expiration", String(expiration)) }
        if let priority { body("apns-priority", String(priority.rawValue)) }
        if let topic { body("apns-topic", topic) }
        if let collapseID { body("apns-collapse-id", collapseID) }
    }

    /// Reads the `apns-*` fields of a received request (other fields are ignored), as the service does.
    ///
    /// - Throws: `.duplicateHeaders` when an `apns-*` header repeats, `.badMessageId`, `.badExpirationDate`,
    ///   `.badPriority`, `.invalidPushType` (a push type the API does not know), `.badCollapseId`.
    /// Inlinable so that it is specialized for the caller's sequence: the simulator runs it for every request.
    @inlinable
    public init(fields: some Sequence<(name: String, value: String)>) throws(APNSReason) {
        // Known names are tracked in a bit set; a set of strings only for unknown `apns-*` names, which are rare.
        var seenKnown: UInt8 = 0
        var seenOther = Set<String>()
        var pushType: APNSPushType?
        var id: String?
        var expiration: UInt32?
        var priority: NotificationPriority?
        var topic: String?
        var collapseID: String?
        for (rawName, value) in fields {
            // HTTP/2 field names arrive lowercase; only others pay for lowercasing.
            let name = rawName.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? rawName.lowercased() : rawName
            guard name.utf8.starts(with: "apns-".utf8) else { continue }
            guard let known = KnownName(name) else {
                guard seenOther.insert(name).inserted else { throw .duplicateHeaders }
                continue
            }
            guard seenKnown & known.rawValue == 0 else { throw .duplicateHeaders }
            seenKnown |= known.rawValue
            switch known {
            case .pushType:
                let type = APNSPushType(rawValue: value)
                guard APNSPushType.known.contains(type) else { throw .invalidPushType }
                pushType = type
            case .id:
                guard Self.isCanonicalUUID(value) else { throw .badMessageId }
                id = value
            case .expiration:
                guard let seconds = UInt32(value) else { throw .badExpirationDate }
                expiration = seconds
            case .priority:
                guard let raw = UInt8(value), NotificationPriority(rawValue: raw).isValidForHTTP2 else {
                    throw .badPriority
                }
                priority = NotificationPriority(rawValue: raw)
            case .topic:
                topic = value
            case .collapseID:
                guard value.utf8.count <= Self.maximumCollapseIDBytes else { throw .badCollapseId }
                collapseID = value
            }
        }
        try self.init(
            pushType: pushType,
            id: id,
            expiration: expiration,
            priority: priority,
            topic: topic,
            collapseID: collapseID
        )
    }

    /// The `apns-*` names the service reads, as bits of a set. Told apart by length first, so a field costs one
    /// comparison at most: this runs for every field of every request the simulator checks.
    @usableFromInline
    enum KnownName: UInt8 {
        case pushType = 1
        case id = 2
        case expiration = 4
        case priority = 8
        case topic = 16
        case collapseID = 32

        @inlinable
        init?(_ name: String) {
            let (candidate, text): (KnownName, StaticString)
            switch name.utf8.count {
            case 7: (candidate, text) = (.id, "apns-id")
            case 10: (candidate, text) = (.topic, "apns-topic")
            case 13: (candidate, text) = (.priority, "apns-priority")
            case 14: (candidate, text) = (.pushType, "apns-push-type")
            case 15: (candidate, text) = (.expiration, "apns-expiration")
            case 16: (candidate, text) = (.collapseID, "apns-collapse-id")
            default: return nil
            }
            let matches = text.withUTF8Buffer { expected in name.utf8.elementsEqual(expected) }
            guard matches else { return nil }
            self = candidate
        }
    }

    /// Whether `text` is a UUID in the lowercase 8-4-4-4-12 form the service echoes.
    public static func isCanonicalUUID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
                let isLower = byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")
                guard isDigit || isLower else { return false }
            }
        }
        return true
    }
}

extension APNSRequestHeaders {
    public static func == (lhs: APNSRequestHeaders, rhs: APNSRequestHeaders) -> Bool {
        lhs.pushType == rhs.pushType && lhs.id == rhs.id && lhs.expiration == rhs.expiration
            && lhs.priority == rhs.priority && lhs.topic == rhs.topic && lhs.collapseID == rhs.collapseID
    }
}
