import SalvoService

/// The console's sign-ins, as a value with the time and the tokens given: sessions (a cookie's token, bound to the
/// API key that opened it, ending after `lifetime`) and one-time entries (a token in a link that opens a session once,
/// within `entryLifetime`). Only tokens' SHA-256 are kept, in memory: a restart ends every session. At most `maximum`
/// of each; the one that would end soonest makes room.
struct ConsoleSessions: Sendable {
    struct Grant: Hashable, Sendable {
        var keyID: String
        /// Milliseconds since 1970.
        var expiresAt: Int64
    }

    /// A session's life: 8 hours from its sign-in.
    static let lifetime: Int64 = 8 * 3600 * 1000
    /// A one-time link's: 60 seconds.
    static let entryLifetime: Int64 = 60 * 1000
    static let maximum = 1024

    private(set) var sessions: [[UInt8]: Grant] = [:]
    private(set) var entries: [[UInt8]: Grant] = [:]

    /// Opens a session for `keyID` under `token` (the cookie's value).
    mutating func open(_ token: String, keyID: String, now: Int64) -> Grant {
        let grant = Grant(keyID: keyID, expiresAt: now + Self.lifetime)
        Self.put(grant, for: token, in: &self.sessions, now: now)
        return grant
    }

    /// The key a session's token was opened with, while the session lasts.
    mutating func keyID(session token: String, now: Int64) -> String? {
        let hash = APIKeys.hash(token)
        guard let grant = self.sessions[hash] else { return nil }
        guard grant.expiresAt > now else {
            self.sessions[hash] = nil
            return nil
        }
        return grant.keyID
    }

    /// Ends the session of `token` (signing out).
    mutating func close(_ token: String) {
        self.sessions[APIKeys.hash(token)] = nil
    }

    /// Ends every session and entry of `keyID` (the key was revoked).
    mutating func end(keyID: String) {
        self.sessions = self.sessions.filter { $0.value.keyID != keyID }
        self.entries = self.entries.filter { $0.value.keyID != keyID }
    }

    /// A one-time entry for `keyID` under `token` (the link's last segment).
    mutating func addEntry(_ token: String, keyID: String, now: Int64) -> Grant {
        let grant = Grant(keyID: keyID, expiresAt: now + Self.entryLifetime)
        Self.put(grant, for: token, in: &self.entries, now: now)
        return grant
    }

    /// Takes an entry: its key while it lasts, once (a second use finds nothing).
    mutating func takeEntry(_ token: String, now: Int64) -> String? {
        guard let grant = self.entries.removeValue(forKey: APIKeys.hash(token)), grant.expiresAt > now else {
            return nil
        }
        return grant.keyID
    }

    private static func put(_ grant: Grant, for token: String, in grants: inout [[UInt8]: Grant], now: Int64) {
        grants = grants.filter { $0.value.expiresAt > now }
        if grants.count >= Self.maximum, let soonest = grants.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
            grants[soonest.key] = nil
        }
        grants[APIKeys.hash(token)] = grant
    }
}
