/// What a broadcast channel id looks like on the wire: non-empty standard base64 (padding optional) of at most 256
/// characters, as APNs issues them and as a header or a payload's `input-push-channel` carries them. Anything else
/// would be answered `BadChannelId`.
public enum ChannelIDFormat {
    /// Whether `id` is well-formed: base64 letters only, `=` only as one or two last characters of a length that
    /// is a multiple of four, and no length that leaves a single character over (it would decode to no byte).
    public static func isWellFormed(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= 256 else { return false }
        var body = bytes[...]
        var padding = 0
        while body.last == UInt8(ascii: "=") {
            body = body.dropLast()
            padding += 1
        }
        guard padding <= 2, !body.isEmpty else { return false }
        guard padding == 0 || bytes.count % 4 == 0 else { return false }
        guard body.count % 4 != 1 else { return false }
        return body.allSatisfy(Self.isStandardBase64Letter)
    }

    private static func isStandardBase64Letter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
