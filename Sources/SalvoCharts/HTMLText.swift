/// Text made safe for HTML: in an element's content or a quoted attribute's value, it is shown as text and never
/// read as markup (`<`, `>`, `&`, `"` and `'` as character references).
public enum HTMLText {
    public static func escaped(_ text: some StringProtocol) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
