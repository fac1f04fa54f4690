/// A JSON value, as payloads carry them: what the builder writes and what validation reads.
///
/// Objects keep their members in order (a payload's bytes are the sender's, not a re-sorted copy), and
/// numbers keep the literal they were written as, so reading and writing a value never changes it.
///
/// Not `indirect`: an array's or an object's elements are in the array's storage already, so a value needs no box of
/// its own (`indirect` would box every value read, down to each string of a payload: an allocation each).
public enum JSONValue: Hashable, Sendable {
    case string(String)
    /// A number, as its JSON literal (`5`, `-1.5e3`).
    case number(String)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([JSONMember])

    /// A whole number.
    public static func int(_ value: Int) -> JSONValue { .number(String(value)) }
    /// A floating-point number (finite).
    public static func double(_ value: Double) -> JSONValue {
        precondition(value.isFinite, "JSON has no NaN or infinity")
        return .number(value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value))
    }

    /// The value of `key` in an object (the first, if a sender repeated it); nil for other kinds.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// What kind of value this is, in words for messages ("a string", "an object").
    public var kindName: String {
        switch self {
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// One key and value of a JSON object.
public struct JSONMember: Hashable, Sendable {
    public var key: String
    public var value: JSONValue

    public init(_ key: String, _ value: JSONValue) {
        self.key = key
        self.value = value
    }
}

extension JSONValue {
    /// The compact JSON text of this value, as UTF-8.
    public var compactBytes: [UInt8] {
        var out: [UInt8] = []
        self.write(to: &out)
        return out
    }

    func write(to out: inout [UInt8]) {
        switch self {
        case .string(let text): Self.writeString(text, to: &out)
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xf)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Why a text is not JSON: the first error, with its line and column.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { self.message }
}

extension JSONValue {
    /// Parses strict RFC 8259 text (as the push service reads a payload): the value and its compact bytes, in the
    /// sender's order.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> (value: JSONValue, compact: [UInt8]) {
        do {
            return try JSONScanner.parse(bytes)
        } catch {
            throw JSONParseError(message: error.message)
        }
    }

    /// `parse(_:)`, with the range of the compact bytes each value at `path` took, in the order of the text: `path`
    /// is a list of keys, `*` standing for every element of an array (`["notifications", "*", "payload"]`: the
    /// payload of each element of the top object's `notifications` that has one). A part's compact bytes are then a
    /// slice of the whole, not written again.
    ///
    /// With `valuesAtSpans` false, each value at `path` is given as an empty value of its kind (an object without
    /// members, an empty string): checked and written compact, not built, and its objects' keys not compared for
    /// repeats; read its span (`parse(_:)`) for the value itself.
    public static func parse(
        _ bytes: [UInt8],
        spansAt path: [String],
        valuesAtSpans: Bool = true
    ) throws(JSONParseError) -> (value: JSONValue, compact: [UInt8], spans: [Range<Int>]) {
        do {
            return try JSONScanner.parse(bytes, spansAt: path, valuesAtSpans: valuesAtSpans)
        } catch {
            throw JSONParseError(message: error.message)
        }
    }
}
