import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file that every process using one signing key shares, so that they send one provider token rather than one
/// each: APNs answers `TooManyProviderTokenUpdates` when a key's token changes more often than every 20 minutes,
/// which is what cron jobs, retries and parallel workers that each mint their own get.
///
/// Entries are keyed by team, key id and a fingerprint of the public key (a different key under the same id never
/// reuses a token). The file is JSON, mode 0600 (it holds live credentials; its folder is made 0700), replaced
/// atomically (a temporary file renamed over it), and every read-decide-write happens under an exclusive `flock` on
/// a lock file beside it, so two processes starting together mint one token: the second waits, then reads the
/// first one's. Entries past APNs' hour are dropped on the next write.
///
/// Thread-safe (each use opens, locks and closes the files); a failure to read or write the file is not fatal: the
/// process then keeps a token of its own, as it would without a cache.
public final class ProviderTokenCache: Sendable {
    /// The cache file.
    public let path: String
    private var lockPath: String { self.path + ".lock" }

    /// Makes the folder (0700) when it is missing and checks that the lock file can be opened.
    public init(path: String) throws(HTTP2ClientError) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(
                    atPath: folder,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700]
                )
            } catch {
                throw HTTP2ClientError(
                    .configuration,
                    "cannot make the token cache's folder \(folder): \(error); give another --token-cache path"
                )
            }
        }
        let fd = open(self.lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw HTTP2ClientError(
                .configuration,
                "cannot open the token cache lock \(self.lockPath): \(String(cString: strerror(errno))); "
                    + "give another --token-cache path"
            )
        }
        close(fd)
    }

    /// The user's cache folder's file for provider tokens: `$XDG_CACHE_HOME/salvo/provider-tokens.json`, else
    /// `$HOME/.cache/salvo/provider-tokens.json`; nil when neither variable is set. `environment` is passed in:
    /// the library reads no environment variable itself.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            return cache + "/salvo/provider-tokens.json"
        }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return home + "/.cache/salvo/provider-tokens.json"
    }

    /// The entry's key for a signer: team, key id and the first 8 bytes of SHA-256 of the public key, in hex.
    static func key(for signer: JWTSigner) -> String {
        let digest = SHA256.hash(data: signer.publicKey.rawRepresentation)
        let fingerprint = digest.prefix(8).map { String(format: "%02x", $0) }.joined()
        return "\(signer.teamID).\(signer.keyID).\(fingerprint)"
    }

    /// Under the lock: reads the entry for `key` (nil when there is none, or the file cannot be read), lets `decide`
    /// pick the token to use, and writes it back when it differs from the one read. Returns what `decide` picked.
    func update(
        key: String,
        now: Int64,
        _ decide: (ProviderToken.Bearer?) -> ProviderToken.Bearer
    ) -> ProviderToken.Bearer {
        let lock = open(self.lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { return decide(nil) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { return decide(nil) }
        }
        defer { flock(lock, LOCK_UN) }
        var entries = self.read()
        let cached = entries[key].map { ProviderToken.Bearer(authorization: $0.authorization, issuedAt: $0.issuedAt) }
        let chosen = decide(cached)
        if chosen != cached {
            entries = entries.filter { now - $0.value.issuedAt < ProviderToken.lifetime }
            entries[key] = Entry(authorization: chosen.authorization, issuedAt: chosen.issuedAt)
            self.write(entries)
        }
        return chosen
    }

    private struct Entry: Codable {
        var authorization: String
        var issuedAt: Int64
    }

    private func read() -> [String: Entry] {
        guard let data = FileManager.default.contents(atPath: self.path), !data.isEmpty else { return [:] }
        return (try? JSONDecoder().decode([String: Entry].self, from: data)) ?? [:]
    }

    /// Writes a temporary file (0600) beside the cache and renames it over the cache.
    private func write(_ entries: [String: Entry]) {
        guard let data = try? JSONEncoder().encode(entries) else { return }
        let temporary = self.path + ".\(getpid()).tmp"
        let fd = open(temporary, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced, rename(temporary, self.path) == 0 else {
            unlink(temporary)
            return
        }
    }
}
