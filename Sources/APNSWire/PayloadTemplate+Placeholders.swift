extension PayloadTemplate {
    /// One `{{name}}` or `"{{name:int}}"` in a template's text: the bytes it replaces (for `:int`, the quotes too).
    struct Placeholder {
        var start: Int
        var end: Int
        var name: String
        var kind: SlotKind
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
