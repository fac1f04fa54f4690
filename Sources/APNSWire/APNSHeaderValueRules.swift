/// Header values APNs would refuse for every request of a job, judged once before it starts, in one place for
/// every command that takes them (`send`, `check`). Each rule names the option it judges and says what to give.
public enum APNSHeaderValueRules {
    /// Why `topic` (`--topic`) cannot be sent, nil when it can: it is empty, or it holds a line break or another
    /// control character (which would split the header).
    public static func topicProblem(_ topic: String) -> String? {
        if topic.isEmpty { return "--topic is empty: give the app's bundle id" }
        if Self.hasControlCharacters(topic) { return "--topic holds a line break or another control character" }
        return nil
    }

    /// Why `collapseID` (`--collapse-id`) cannot be sent, nil when it can: a control character, or more than the
    /// 64 bytes APNs takes.
    public static func collapseIDProblem(_ collapseID: String) -> String? {
        if Self.hasControlCharacters(collapseID) {
            return "--collapse-id holds a line break or another control character"
        }
        if collapseID.utf8.count > 64 {
            return "--collapse-id is \(collapseID.utf8.count) bytes; APNs takes at most 64"
        }
        return nil
    }

    /// Why a signing key's identifier (`--key-id`, `--team-id`: `option`) is not one Apple issues (10 letters and
    /// digits), nil when it is.
    public static func identifierProblem(_ value: String, option: String) -> String? {
        guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return "\(option) is 10 letters and digits, as Apple issues it (got '\(TerminalText.escaped(value))')"
        }
        return nil
    }

    private static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}
