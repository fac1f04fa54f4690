import NIOConcurrencyHelpers

/// The console of `salvo serve` (`/` and `/console/…`), read-only, behind the API's keys: its sign-ins
/// (`ConsoleSessions`) and whether its cookie is marked `Secure` (the service speaks TLS). `ServiceResponder` without
/// one answers those paths 404 (`--no-console`).
public final class Console: Sendable {
    /// The cookie that carries a session's token.
    static let cookieName = "salvo_console"

    let secureCookie: Bool
    let sessions = NIOLockedValueBox(ConsoleSessions())

    public init(secureCookie: Bool) {
        self.secureCookie = secureCookie
    }

    /// A new token: 32 random bytes as 64 hexadecimal digits.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let text = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }.joined()
    }
}
