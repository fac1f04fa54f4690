/// A notification payload: a JSON object with an `aps` object, held as the compact UTF-8 bytes that go on
/// the wire.
///
/// Made either by the builder (`init(aps:custom:)`) or from a user's JSON text (`init(json:)`), which is
/// checked strictly and compacted; both give the bytes once, and every frame of a job shares them.
public struct Payload: Hashable, Sendable {
    /// The compact JSON, as sent.
    public let bytes: [UInt8]
    /// The parsed value, for inspection.
    public let value: JSONValue

    /// The number of bytes on the wire: what the format limits count.
    public var byteCount: Int { self.bytes.count }

    /// The compact JSON as text.
    public var text: String { String(decoding: self.bytes, as: UTF8.self) }

    /// Builds a payload from the `aps` dictionary and custom keys (which must not be named `aps`).
    public init(aps: APS, custom: [JSONMember] = []) {
        precondition(!custom.contains { $0.key == "aps" }, "custom keys live outside aps")
        let value = JSONValue.object([JSONMember("aps", aps.jsonValue)] + custom)
        self.value = value
        self.bytes = value.compactBytes
    }

    /// Reads a payload from JSON text: it must be an object with an `aps` object, and the `aps` keys the
    /// guide defines must have their documented types. White space is removed; order and bytes are kept.
    public init(json: String) throws(PayloadError) {
        try self.init(jsonBytes: Array(json.utf8))
    }

    /// Reads a payload from UTF-8 JSON bytes (see `init(json:)`).
    public init(jsonBytes: [UInt8]) throws(PayloadError) {
        let parsed: (value: JSONValue, compact: [UInt8])
        do {
            parsed = try JSONScanner.parse(jsonBytes)
        } catch {
            throw PayloadError(.invalidJSON, "not valid JSON: \(error.message)")
        }
        try Self.validate(parsed.value)
        self.value = parsed.value
        self.bytes = parsed.compact
    }

    /// A payload from a JSON value already read (a part of a larger document): checked as `init(jsonBytes:)`
    /// checks, and written compact, without reading it a second time.
    public init(value: JSONValue) throws(PayloadError) {
        try Self.validate(value)
        self.value = value
        self.bytes = value.compactBytes
    }

    /// A payload from a JSON value already read and its compact bytes as the parser wrote them
    /// (`JSONValue.parse(_:spansAt:)`): checked as `init(value:)` checks, the bytes kept as they are.
    public init(value: JSONValue, compact: [UInt8]) throws(PayloadError) {
        try Self.validate(value)
        self.value = value
        self.bytes = compact
    }

    /// Throws unless the payload fits `limit`.
    public func check(limit: PayloadLimit) throws(PayloadError) {
        if self.bytes.isEmpty {
            throw PayloadError(.empty, "the payload is empty")
        }
        if self.bytes.count > limit.bytes {
            throw PayloadError(
                .tooLarge,
                "the payload is \(self.bytes.count) bytes; \(limit.name) allows at most \(limit.bytes)"
            )
        }
    }

    /// Throws when `priority` is 10 and the `aps` object holds only `content-available`: such a silent
    /// notification must go at priority 5.
    public func check(priority: NotificationPriority) throws(PayloadError) {
        if priority == .immediate && self.isContentAvailableOnly {
            throw PayloadError(
                .backgroundAtImmediatePriority,
                "a payload whose aps holds only content-available must be sent at priority 5, not 10"
            )
        }
    }

    /// Whether the `aps` object holds `content-available` and nothing else (a silent notification).
    public var isContentAvailableOnly: Bool {
        guard case .object(let members)? = self.value["aps"] else { return false }
        return members.count == 1 && members[0].key == "content-available"
    }

    /// Whether the JSON in `json` has an `aps` object that holds only `content-available`.
    ///
    /// For a gateway that checks every notification: payloads without the text `content-available` (almost
    /// all) are answered by a byte search, and only the rest are parsed.
    public static func isContentAvailableOnly(_ json: UnsafeRawBufferPointer) -> Bool {
        guard Self.contains(json, "content-available") else { return false }
        guard let parsed = try? JSONScanner.parse(Array(json)),
            case .object(let members)? = parsed.value["aps"]
        else { return false }
        return members.count == 1 && members[0].key == "content-available"
    }

    private static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: StaticString) -> Bool {
        let count = needle.utf8CodeUnitCount
        guard haystack.count >= count else { return false }
        let first = needle.utf8Start[0]
        var index = 0
        while index <= haystack.count - count {
            if haystack[index] == first {
                var matched = 1
                while matched < count, haystack[index + matched] == needle.utf8Start[matched] { matched += 1 }
                if matched == count { return true }
            }
            index += 1
        }
        return false
    }

    // Table 3-1 and Table 3-2 of the guide: the types of the keys it defines. Other keys are left alone,
    // as the push service leaves them (newer systems define more).
    private static func validate(_ value: JSONValue) throws(PayloadError) {
        guard case .object = value else {
            throw PayloadError(.missingAPS, "the payload must be a JSON object; it is \(value.kindName)")
        }
        guard let aps = value["aps"] else {
            throw PayloadError(.missingAPS, "the payload has no \"aps\" object")
        }
        guard case .object = aps else {
            throw PayloadError(.missingAPS, "\"aps\" must be an object; it is \(aps.kindName)")
        }
        if let alert = aps["alert"] {
            switch alert {
            case .string: break
            case .object:
                for key in ["title", "body", "loc-key", "launch-image"] {
                    try Self.expect(alert[key], "aps.alert.\(key)", string: true, null: false, array: false)
                }
                for key in ["title-loc-key", "action-loc-key"] {
                    try Self.expect(alert[key], "aps.alert.\(key)", string: true, null: true, array: false)
                }
                try Self.expect(
                    alert["title-loc-args"],
                    "aps.alert.title-loc-args",
                    string: false,
                    null: true,
                    array: true
                )
                try Self.expect(alert["loc-args"], "aps.alert.loc-args", string: false, null: false, array: true)
            default:
                throw PayloadError(.wrongType, "aps.alert must be a string or an object; it is \(alert.kindName)")
            }
        }
        if let badge = aps["badge"], case .number = badge {
        } else if let badge = aps["badge"] {
            throw PayloadError(.wrongType, "aps.badge must be a number; it is \(badge.kindName)")
        }
        if let sound = aps["sound"] {
            switch sound {
            case .string, .object: break
            default: throw PayloadError(.wrongType, "aps.sound must be a string; it is \(sound.kindName)")
            }
        }
        if let flag = aps["content-available"], case .number = flag {
        } else if let flag = aps["content-available"] {
            throw PayloadError(.wrongType, "aps.content-available must be a number (1); it is \(flag.kindName)")
        }
        try Self.expect(aps["category"], "aps.category", string: true, null: false, array: false)
    }

    private static func expect(
        _ value: JSONValue?,
        _ path: String,
        string: Bool,
        null: Bool,
        array: Bool
    ) throws(PayloadError) {
        guard let value else { return }
        switch value {
        case .string where string, .null where null: return
        case .array(let items) where array:
            if let bad = items.first(where: { if case .string = $0 { false } else { true } }) {
                throw PayloadError(.wrongType, "\(path) must hold strings only; it holds \(bad.kindName)")
            }
            return
        default:
            var kinds: [String] = []
            if string { kinds.append("a string") }
            if array { kinds.append("an array of strings") }
            if null { kinds.append("null") }
            throw PayloadError(
                .wrongType,
                "\(path) must be \(kinds.joined(separator: " or ")); it is \(value.kindName)"
            )
        }
    }
}
