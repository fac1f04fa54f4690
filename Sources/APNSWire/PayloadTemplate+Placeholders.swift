extension PayloadTemplate {
    /// One `{{name}}` or `"{{name:int}}"` in a template's text: the bytes it replaces (for `:int`, the quotes too).
    struct Placeholder {
        var start: Int
        var end: Int
        var name: String
        var kind: SlotKind
        /// Seconds added to the send time (`{{$now+900}}`).
        var offset: Int64 = 0
    }

    /// Why a template's placeholders are refused, at a byte offset of its text.
    struct PlaceholderFailure: Error {
        var offset: Int
        var message: String
    }

    /// The placeholders of `json` (valid JSON) in order.
    static func placeholders(in json: [UInt8]) throws(PlaceholderFailure) -> [Placeholder] {
        var found: [Placeholder] = []
        var index = 0
        while index < json.count {
            guard json[index] == UInt8(ascii: "\"") else {
                index += 1
                continue
            }
            // A string: its content runs to the next quote that no backslash escapes.
            let open = index
            var close = index + 1
            while close < json.count && json[close] != UInt8(ascii: "\"") {
                close += json[close] == UInt8(ascii: "\\") ? 2 : 1
            }
            index = close + 1
            var after = index
            while after < json.count && [0x20, 0x09, 0x0A, 0x0D].contains(json[after]) { after += 1 }
            let isKey = after < json.count && json[after] == UInt8(ascii: ":")
            var cursor = open + 1
            while cursor + 1 < close {
                guard json[cursor] == UInt8(ascii: "{") && json[cursor + 1] == UInt8(ascii: "{") else {
                    cursor += 1
                    continue
                }
                if isKey {
                    throw PlaceholderFailure(offset: cursor, message: "a placeholder belongs in a value, not in a key")
                }
                var end = cursor + 2
                while end + 1 < close && !(json[end] == UInt8(ascii: "}") && json[end + 1] == UInt8(ascii: "}")) {
                    end += 1
                }
                guard end + 1 < close else {
                    throw PlaceholderFailure(offset: cursor, message: "'{{' is not closed by '}}' within its string")
                }
                let inner = String(decoding: json[(cursor + 2)..<end], as: UTF8.self)
                var parts = inner.split(separator: ":", omittingEmptySubsequences: false).map {
                    $0.trimmingCharacters(in: " ")
                }
                let name = parts.removeFirst()
                guard !name.isEmpty else {
                    throw PlaceholderFailure(offset: cursor, message: "'{{\(inner)}}' names no column")
                }
                // `$` names what the sender fills, not a column: `"{{$now}}"`, the send time, or `"{{$now+900}}"`
                // (seconds after it).
                if name.hasPrefix("$") {
                    guard parts.isEmpty, let offset = PayloadTemplate.sendTimeOffset(name) else {
                        throw PlaceholderFailure(
                            offset: cursor,
                            message:
                                "'{{\(inner)}}': the only name starting with '$' is \(PayloadTemplate.sendTimeName) "
                                + "(the send time, UNIX seconds), or \(PayloadTemplate.sendTimeName)+SECONDS"
                        )
                    }
                    guard cursor == open + 1 && end + 2 == close else {
                        throw PlaceholderFailure(
                            offset: cursor,
                            message: "'{{\(inner)}}' must be the whole value, written \"{{\(inner)}}\" (a number)"
                        )
                    }
                    found.append(Placeholder(start: open, end: close + 1, name: name, kind: .sendTime, offset: offset))
                    cursor = end + 2
                    continue
                }
                guard !name.contains(where: { "{}\\\"".contains($0) }) else {
                    throw PlaceholderFailure(offset: cursor, message: "'{{\(inner)}}' is not a column name")
                }
                switch parts {
                case []:
                    found.append(Placeholder(start: cursor, end: end + 2, name: name, kind: .string))
                case ["int"]:
                    guard cursor == open + 1 && end + 2 == close else {
                        throw PlaceholderFailure(
                            offset: cursor,
                            message: "'{{\(inner)}}' must be the whole value, written \"{{\(inner)}}\""
                        )
                    }
                    found.append(Placeholder(start: open, end: close + 1, name: name, kind: .integer))
                default:
                    throw PlaceholderFailure(
                        offset: cursor,
                        message: "'{{\(inner)}}': the only kind is ':int' (a whole JSON integer)"
                    )
                }
                cursor = end + 2
            }
        }
        return found
    }

    /// The seconds after the send time a `$now` placeholder names: 0 for `$now`, N for `$now+N`, -N for `$now-N`
    /// (at most a year either way); nil for any other name.
    static func sendTimeOffset(_ name: String) -> Int64? {
        guard name.hasPrefix(Self.sendTimeName) else { return nil }
        let rest = name.dropFirst(Self.sendTimeName.count).filter { $0 != " " }
        guard let sign = rest.first else { return 0 }
        guard sign == "+" || sign == "-", let seconds = Int64(rest.dropFirst()), seconds <= 366 * 86_400,
            rest.dropFirst().allSatisfy(\.isASCII)
        else { return nil }
        return sign == "+" ? seconds : -seconds
    }

    /// The 1-based line and column of byte `offset` of `text` (columns count characters).
    static func position(of offset: Int, in text: [UInt8]) -> Position {
        var line = 1
        var column = 1
        for byte in text[..<min(offset, text.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return Position(line: line, column: column)
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> String { String(self).trimmingCharacters(in: set) }
}

extension PayloadTemplate {
    /// The template's compact JSON with its placeholders written back (`{{name}}`, `"{{name:int}}"`,
    /// `"{{$now+N}}"`): what rules that read the structure (`LiveActivityCheck`) parse, placeholders and all.
    public var placeholderText: [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(self.literals.count + 16 * self.segments.count)
        for segment in self.segments {
            text.append(contentsOf: self.literals[segment.literalStart..<segment.literalEnd])
            switch segment.kind {
            case .sendTime:
                let offset =
                    segment.sendTimeOffset == 0
                    ? "" : segment.sendTimeOffset > 0 ? "+\(segment.sendTimeOffset)" : "\(segment.sendTimeOffset)"
                text.append(contentsOf: "\"{{\(Self.sendTimeName)\(offset)}}\"".utf8)
            case .integer where segment.column >= 0:
                text.append(contentsOf: "\"{{\(self.columns[segment.column]):int}}\"".utf8)
            case .string where segment.column >= 0:
                text.append(contentsOf: "{{\(self.columns[segment.column])}}".utf8)
            default:
                break
            }
        }
        return text
    }
}
