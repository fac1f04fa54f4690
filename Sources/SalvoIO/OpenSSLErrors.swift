internal import COpenSSL

/// OpenSSL's thread-local error queue, drained into messages. Every SSL call site clears the queue
/// first, so what is drained afterwards belongs to that call.
enum OpenSSLErrors {
    static func clear() {
        ERR_clear_error()
    }

    /// Removes every queued error and returns them as one line ("" if none).
    static func drain() -> String {
        var parts: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        for _ in 0..<32 {
            let code = ERR_get_error()
            if code == 0 {
                break
            }
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.joined(separator: "; ")
    }

    /// Drains the queue into (reasons, text) in one pass.
    static func drainWithReasons() -> (reasons: [Int32], text: String) {
        var reasons: [Int32] = []
        var parts: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        for _ in 0..<32 {
            let code = ERR_get_error()
            if code == 0 {
                break
            }
            if ERR_GET_LIB(code) == ERR_LIB_SSL {
                reasons.append(ERR_GET_REASON(code))
            }
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return (reasons, parts.joined(separator: "; "))
    }

    /// `message` plus OpenSSL's explanation, if it gave one.
    static func message(_ message: String, details: String) -> String {
        details.isEmpty ? message : "\(message) (openssl: \(details))"
    }
}
