/// A strict RFC 8259 parser that also produces the text's compact form, in one pass.
///
/// Written by hand because no library here does both: Foundation's parser accepts trailing commas (which
/// the push service does not) and reports errors by character offset, and re-serialising its result
/// reorders keys and escapes `/`. This keeps the sender's bytes and order, drops only insignificant white
/// space, and names the line and column of the first error. The service reads every request with it, so the
/// common cases take a short way: a string without escapes is cut from the input whole, and a small object's keys
/// are checked for repeats without a set.
struct JSONScanner {
    private let input: [UInt8]
    private var index = 0
    private var output: [UInt8] = []
    private var depth = 0
    private static let maximumDepth = 64
    /// Up to this many members, an object's keys are checked for repeats one by one rather than with a set.
    private static let smallObject = 16
    /// Where the compact form's spans are taken (`parse(_:spansAt:)`): a path of keys, `*` for every element of
    /// an array. Empty: none.
    private let spanPath: [String]
    /// The length of the path to the value being read, while that path matches `spanPath` (off it, unchanged).
    private var level = 0
    /// How many components of `spanPath` the path to the value being read matches.
    private var matched = 0
    private var spans: [Range<Int>] = []
    /// Whether the values at `spanPath` are built (else read for their syntax and compact form only).
    private let valuesAtSpans: Bool
    /// False while a value at `spanPath` is read without being built: its parts are not kept, and an object's keys
    /// are not compared (the caller reads the span again when it needs the value, which compares them).
    private var building = true

    struct Failure: Error {
        let message: String
    }

    /// Parses `input`; returns its value and compact form, or throws a message with line and column.
    static func parse(_ input: [UInt8]) throws(Failure) -> (value: JSONValue, compact: [UInt8]) {
        let parsed = try Self.parse(input, spansAt: [], valuesAtSpans: true)
        return (parsed.value, parsed.compact)
    }

    /// `parse(_:)`, with the range of the compact form each value at `path` took, in the order of the text (for
    /// `["notifications", "*", "payload"]`: the payload of each element of the top object's `notifications` array
    /// that has one), so that a part's compact bytes are cut from the whole rather than written again.
    ///
    /// With `valuesAtSpans` false, each value at `path` is given as an empty value of its kind (an object without
    /// members, an empty string): its syntax is checked and its compact form written, but nothing is built and its
    /// objects' keys are not compared for repeats; the caller reads the span when it needs the value.
    static func parse(
        _ input: [UInt8],
        spansAt path: [String],
        valuesAtSpans: Bool
    ) throws(Failure) -> (value: JSONValue, compact: [UInt8], spans: [Range<Int>]) {
        var scanner = JSONScanner(input: input, spanPath: path, valuesAtSpans: valuesAtSpans)
        if input.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw scanner.failure("the text starts with a UTF-8 byte order mark (BOM), which JSON does not allow")
        }
        scanner.output.reserveCapacity(input.count)
        scanner.skipWhitespace()
        let value = try scanner.value()
        scanner.skipWhitespace()
        if scanner.index < input.count {
            throw scanner.failure("unexpected text after the end of the JSON value")
        }
        return (value, scanner.output, scanner.spans)
    }

    private init(input: [UInt8], spanPath: [String], valuesAtSpans: Bool) {
        self.input = input
        self.spanPath = spanPath
        self.valuesAtSpans = valuesAtSpans
    }

    /// A member's value (`key`) or an array's element (nil), its span recorded when its path is `spanPath`.
    private mutating func pathValue(_ key: String?) throws(Failure) -> JSONValue {
        guard self.matched == self.level, self.level < self.spanPath.count else { return try self.value() }
        let wanted = self.spanPath[self.level]
        let matches = key.map { $0 == wanted } ?? (wanted == "*")
        self.level += 1
        defer { self.level -= 1 }
        // Off the path, the level stays one past what matched: nothing below it is compared.
        guard matches else { return try self.value() }
        self.matched += 1
        defer { self.matched -= 1 }
        guard self.matched == self.spanPath.count else { return try self.value() }
        let start = self.output.count
        let value: JSONValue
        if self.valuesAtSpans {
            value = try self.value()
        } else {
            self.building = false
            defer { self.building = true }
            value = try self.value()
        }
        self.spans.append(start..<self.output.count)
        return value
    }

    private func failure(_ what: String) -> Failure {
        var line = 1
        var column = 1
        for byte in self.input[..<min(self.index, self.input.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return Failure(message: "line \(line), column \(column): \(what)")
    }

    private var current: UInt8? { self.index < self.input.count ? self.input[self.index] : nil }

    private mutating func skipWhitespace() {
        while let byte = self.current,
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        {
            self.index += 1
        }
    }

    private mutating func emit() {
        self.output.append(self.input[self.index])
        self.index += 1
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(Failure) {
        guard self.current == byte else { throw self.failure(what) }
        self.emit()
    }

    private mutating func value() throws(Failure) -> JSONValue {
        guard let byte = self.current else { throw self.failure("a value was expected, the text ended") }
        switch byte {
        case UInt8(ascii: "{"): return .object(try self.object())
        case UInt8(ascii: "["): return .array(try self.array())
        case UInt8(ascii: "\""): return .string(try self.string())
        case UInt8(ascii: "t"):
            try self.literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try self.literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try self.literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.number())
        default: throw self.failure("a value was expected, found \(Self.show(byte))")
        }
    }

    private mutating func nest() throws(Failure) {
        self.depth += 1
        if self.depth > Self.maximumDepth { throw self.failure("nested more than \(Self.maximumDepth) deep") }
    }

    private mutating func object() throws(Failure) -> [JSONMember] {
        try self.nest()
        self.emit()
        self.skipWhitespace()
        var members: [JSONMember] = []
        var keys: Set<String> = []
        if self.current == UInt8(ascii: "}") {
            self.emit()
            self.depth -= 1
            return members
        }
        // Room for a small object's members at once (growing from one, a payload's object took three allocations).
        if self.building { members.reserveCapacity(Self.smallObject / 2) }
        while true {
            guard self.current == UInt8(ascii: "\"") else {
                throw self.failure(
                    self.current == nil
                        ? "the object is not closed"
                        : "a key in double quotes was expected, found \(Self.show(self.current!))"
                )
            }
            let keyStart = self.index
            let key = try self.string()
            let repeated: Bool
            if !self.building {
                repeated = false
            } else if members.count < Self.smallObject {
                repeated = members.contains { $0.key == key }
            } else {
                if keys.isEmpty { keys = Set(members.map(\.key)) }
                repeated = !keys.insert(key).inserted
            }
            guard !repeated else {
                // Which of the two the service would read is unspecified: refused, as a strict parser should.
                self.index = keyStart
                throw self.failure("the key \"\(key)\" appears twice in one object")
            }
            self.skipWhitespace()
            try self.expect(UInt8(ascii: ":"), "':' was expected after the key")
            self.skipWhitespace()
            let member = try self.pathValue(key)
            if self.building { members.append(JSONMember(key, member)) }
            self.skipWhitespace()
            if self.current == UInt8(ascii: ",") {
                self.emit()
                self.skipWhitespace()
                if self.current == UInt8(ascii: "}") { throw self.failure("a trailing comma before '}'") }
                continue
            }
            try self.expect(UInt8(ascii: "}"), "',' or '}' was expected (is a comma missing?)")
            self.depth -= 1
            return members
        }
    }

    private mutating func array() throws(Failure) -> [JSONValue] {
        try self.nest()
        self.emit()
        self.skipWhitespace()
        var items: [JSONValue] = []
        if self.current == UInt8(ascii: "]") {
            self.emit()
            self.depth -= 1
            return items
        }
        while true {
            let item = try self.pathValue(nil)
            if self.building { items.append(item) }
            self.skipWhitespace()
            if self.current == UInt8(ascii: ",") {
                self.emit()
                self.skipWhitespace()
                if self.current == UInt8(ascii: "]") { throw self.failure("a trailing comma before ']'") }
                continue
            }
            try self.expect(UInt8(ascii: "]"), "',' or ']' was expected (is a comma missing?)")
            self.depth -= 1
            return items
        }
    }

    private mutating func string() throws(Failure) -> String {
        self.emit()
        // The run of bytes that need no decoding, copied whole; most strings are only that.
        let start = self.index
        var end = start
        var ascii = true
        while end < self.input.count {
            let byte = self.input[end]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            if byte >= 0x80 { ascii = false }
            end += 1
        }
        self.output.append(contentsOf: self.input[start..<end])
        self.index = end
        if self.current == UInt8(ascii: "\"") {
            self.emit()
            if !self.building && ascii { return "" }
            // Through the bytes' buffer, not a slice of the array: the generic slice's validation looked its type up
            // at run time for every string of a request.
            let text = self.input.withUnsafeBufferPointer { all -> String? in
                let bytes = UnsafeBufferPointer(rebasing: all[start..<end])
                // ASCII is UTF-8 already: nothing to validate.
                return ascii ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
            }
            guard let text else { throw self.failure("the string is not valid UTF-8") }
            return self.building ? text : ""
        }
        var decoded = Array(self.input[start..<end])
        var pendingHighSurrogate: UInt32?
        while let byte = self.current {
            switch byte {
            case UInt8(ascii: "\""):
                self.emit()
                guard let text = String(validating: decoded, as: UTF8.self) else {
                    throw self.failure("the string is not valid UTF-8")
                }
                return self.building ? text : ""
            case UInt8(ascii: "\\"):
                self.emit()
                guard let escaped = self.current else { break }
                self.emit()
                var unit: UInt32?
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escaped)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    var value: UInt32 = 0
                    for _ in 0..<4 {
                        guard let hex = self.current, let digit = DeviceToken.nibble(hex) else {
                            throw self.failure("\\u needs four hex digits")
                        }
                        value = value << 4 | UInt32(digit)
                        self.emit()
                    }
                    unit = value
                default:
                    self.index -= 1
                    throw self.failure("invalid escape \\\(Self.show(escaped))")
                }
                if let unit {
                    if let high = pendingHighSurrogate, (0xDC00...0xDFFF).contains(unit) {
                        let scalar = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                        decoded.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                        pendingHighSurrogate = nil
                    } else if (0xD800...0xDBFF).contains(unit) {
                        pendingHighSurrogate = unit
                    } else {
                        // A lone surrogate has no UTF-8 form; U+FFFD stands in, as most decoders do.
                        let scalar = Unicode.Scalar(unit) ?? "\u{FFFD}"
                        decoded.append(contentsOf: String(Character(scalar)).utf8)
                    }
                }
            case 0..<0x20:
                throw self.failure("a control character inside a string must be escaped")
            default:
                decoded.append(byte)
                self.emit()
            }
        }
        throw self.failure("the string is not closed")
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard self.index + count <= self.input.count,
            self.input[self.index..<self.index + count].elementsEqual(
                UnsafeBufferPointer(start: word.utf8Start, count: count)
            )
        else { throw self.failure("'\(word)' was expected") }
        for _ in 0..<count { self.emit() }
    }

    private mutating func number() throws(Failure) -> String {
        let start = self.index
        if self.current == UInt8(ascii: "-") { self.emit() }
        guard let first = self.current, Self.isDigit(first) else { throw self.failure("a digit was expected") }
        self.emit()
        if first == UInt8(ascii: "0"), let next = self.current, Self.isDigit(next) {
            throw self.failure("a number cannot have a leading zero")
        }
        while let byte = self.current, Self.isDigit(byte) { self.emit() }
        if self.current == UInt8(ascii: ".") {
            self.emit()
            try self.digits()
        }
        if self.current == UInt8(ascii: "e") || self.current == UInt8(ascii: "E") {
            self.emit()
            if self.current == UInt8(ascii: "+") || self.current == UInt8(ascii: "-") { self.emit() }
            try self.digits()
        }
        return self.building ? String(decoding: self.input[start..<self.index], as: UTF8.self) : ""
    }

    private mutating func digits() throws(Failure) {
        guard let byte = self.current, Self.isDigit(byte) else { throw self.failure("a digit was expected") }
        while let byte = self.current, Self.isDigit(byte) { self.emit() }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func show(_ byte: UInt8) -> String {
        byte >= 0x21 && byte < 0x7f ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }
}
