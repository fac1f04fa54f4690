/// Text from the input made safe to echo on a terminal or in a log: control characters (escape sequences, carriage
/// returns, bells) are shown as `\u{1B}`-style escapes instead of acting on the terminal.
///
/// Applied where an input's value enters a message (`InputError`, `PayloadTemplateError`, a suppression file's row,
/// a refused row echoed), and once more where a command prints an error, so that a value from a token file, a
/// suppression file or a template can never retitle, recolour or clear the operator's terminal.
public enum TerminalText {
    public static func escaped(_ text: some StringProtocol) -> String {
        Self.escaped(text, keepingLineBreaks: false)
    }

    /// `text` escaped; with `keepingLineBreaks`, a line feed stays one (a message of several lines), every other
    /// control character is still escaped.
    public static func escaped(_ text: some StringProtocol, keepingLineBreaks: Bool) -> String {
        guard Self.needsEscaping(text, keepingLineBreaks: keepingLineBreaks) else { return String(text) }
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if Self.isControl(scalar) && !(keepingLineBreaks && scalar == "\n") {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscaping(_ text: some StringProtocol, keepingLineBreaks: Bool) -> Bool {
        text.unicodeScalars.contains { Self.isControl($0) && !(keepingLineBreaks && $0 == "\n") }
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
