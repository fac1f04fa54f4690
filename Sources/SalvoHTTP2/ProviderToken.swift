import Foundation
import NIOConcurrencyHelpers

/// The one authentication token a job's connections share, and when to make a new one.
///
/// APNs wants a token refreshed no more than once every 20 minutes and no less than once every 60: older than an
/// hour it answers `ExpiredProviderToken`, remade more often it answers `TooManyProviderTokenUpdates`. So the
/// token is minted on first use, kept, and re-minted once it is `refreshAfter` old (inside the window). Readers
/// get the cached `authorization` value: signing happens once per refresh, never per request or per connection.
///
/// With a `ProviderTokenCache`, every process using the key shares one token: a token is taken from the cache while
/// it is younger than `refreshAfter`, and a newly minted one is written there for the others. With a
/// `ProviderTokenFile` (`init(file:)`), the token comes from a file another process refreshes and none is minted.
///
/// Thread-safe: the state sits behind a lock that connections take once per batch of requests. The clock is
/// injected (UNIX seconds), so refresh timing is tested without sleeping.
public final class ProviderToken: Sendable {
    /// A minted token and the `authorization` header value that carries it.
    public struct Bearer: Hashable, Sendable {
        /// `bearer <JWT>`.
        public let authorization: String
        /// The `iat` claim (UNIX seconds).
        public let issuedAt: Int64
    }

    /// What to do after the service answered `ExpiredProviderToken` for a token.
    public enum Renewal: Hashable, Sendable {
        /// A newer token is current: send again with it.
        case renewed
        /// No new token may be made; the job must stop, with this explanation.
        case refused(String)
    }

    /// The least time between two tokens (seconds): APNs' 20 minutes.
    public static let minimumInterval: Int64 = 20 * 60
    /// The age after which APNs refuses a token (seconds).
    public static let lifetime: Int64 = 60 * 60

    /// The signing key; nil when the token comes from a file.
    public let signer: JWTSigner?
    /// The file the token comes from, when another process mints it.
    public let file: ProviderTokenFile?
    /// Age (seconds) at which the token is replaced; within [20 min, 60 min).
    public let refreshAfter: Int64
    /// The file shared with other processes using this key; nil keeps the token in this process only.
    public let cache: ProviderTokenCache?
    private let cacheKey: String
    private let clock: @Sendable () -> Int64
    private let state = NIOLockedValueBox(State())

    private struct State {
        var current: Bearer?
        var mints = 0
        var forcedRenewals = 0
    }

    /// - Parameters:
    ///   - refreshAfter: age in seconds at which a new token is made (default 45 minutes); must lie in
    ///     [20 min, 60 min).
    ///   - cache: the token file shared with other processes, if any.
    ///   - clock: the current UNIX time in seconds.
    public init(
        signer: JWTSigner,
        refreshAfter: Int64 = 45 * 60,
        cache: ProviderTokenCache? = nil,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) throws(HTTP2ClientError) {
        guard refreshAfter >= Self.minimumInterval, refreshAfter < Self.lifetime else {
            throw HTTP2ClientError(
                .configuration,
                "a provider token must be refreshed between 20 and 60 minutes of age (got \(refreshAfter) s)"
            )
        }
        self.signer = signer
        self.file = nil
        self.refreshAfter = refreshAfter
        self.cache = cache
        self.cacheKey = ProviderTokenCache.key(for: signer)
        self.clock = clock
    }

    /// The token another process keeps fresh in `file`: every connection sends it, re-read when the file changes,
    /// and none is ever minted here.
    public init(file: ProviderTokenFile) {
        self.signer = nil
        self.file = file
        self.refreshAfter = Self.lifetime - 1
        self.cache = nil
        self.cacheKey = ""
        self.clock = { 0 }
    }

    /// The token to send now, minted when there is none or the current one has reached `refreshAfter`.
    public func current() -> Bearer {
        if let file = self.file { return file.current() }
        let now = self.clock()
        return self.state.withLockedValue { state in
            if let bearer = state.current, now - bearer.issuedAt < self.refreshAfter {
                return bearer
            }
            guard let cache = self.cache else { return self.mint(at: now, into: &state) }
            let bearer = cache.update(key: self.cacheKey, now: now) { cached in
                // Another process's token, while it is young enough (and not from a clock far ahead of ours).
                if let cached, now - cached.issuedAt < self.refreshAfter, cached.issuedAt <= now + 60 {
                    return cached
                }
                return self.mint(at: now, into: &state)
            }
            state.current = bearer
            return bearer
        }
    }

    /// Handles `ExpiredProviderToken` for `rejected`: one early renewal per job is allowed, and only when the
    /// rejected token is at least 20 minutes old (a younger one means the clocks disagree, and remaking it would
    /// earn `TooManyProviderTokenUpdates`). With a token file, the file is looked at at once: a newer token there
    /// is sent, and without one the job stops (`ProviderTokenFileMonitor.renewal(after:now:)`).
    public func renew(after rejected: Bearer) -> Renewal {
        if let file = self.file { return file.renew(after: rejected) }
        let now = self.clock()
        return self.state.withLockedValue { state in
            guard let current = state.current, current.issuedAt == rejected.issuedAt else {
                // Another connection has already replaced it.
                return .renewed
            }
            guard let cache = self.cache else { return self.forceRenewal(of: current, now: now, state: &state) }
            var renewal = Renewal.renewed
            state.current = cache.update(key: self.cacheKey, now: now) { cached in
                // Another process may have renewed it already: take theirs.
                if let cached, cached.issuedAt > rejected.issuedAt, cached.issuedAt <= now + 60 { return cached }
                renewal = self.forceRenewal(of: current, now: now, state: &state)
                return state.current ?? current
            }
            return renewal
        }
    }

    /// Mints a replacement for `current`, refused as expired, unless it is too young to be (the clocks disagree)
    /// or one was already forced in this job.
    private func forceRenewal(of current: Bearer, now: Int64, state: inout State) -> Renewal {
        let age = now - current.issuedAt
        guard age >= Self.minimumInterval else {
            return .refused(
                "APNs says a provider token \(age) s old has expired: this machine's clock is probably behind; "
                    + "fix the clock (NTP) and run the job again"
            )
        }
        guard state.forcedRenewals == 0 else {
            return .refused("APNs refused a freshly renewed provider token as expired; check the machine's clock")
        }
        state.forcedRenewals += 1
        _ = self.mint(at: now, into: &state)
        return .renewed
    }

    /// How many tokens have been signed so far (always 0 with a token file).
    public var mintCount: Int { self.state.withLockedValue { $0.mints } }

    private func mint(at now: Int64, into state: inout State) -> Bearer {
        // Only a token made with `init(signer:…)` is minted: `current()` and `renew(after:)` return before this
        // with a file.
        let bearer = Bearer(authorization: "bearer " + self.signer!.token(issuedAt: now), issuedAt: now)
        state.current = bearer
        state.mints += 1
        return bearer
    }
}
