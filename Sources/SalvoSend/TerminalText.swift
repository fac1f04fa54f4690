/// Text from the input made safe to echo on a terminal: control characters (escape sequences, carriage returns,
/// bells) are shown as `\u{1B}`-style escapes instead of acting on the terminal.
public enum TerminalText {
    public static func escaped(_ text: some StringProtocol) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
