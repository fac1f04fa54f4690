/// Every decision about a provider-token file that another process refreshes (a Kubernetes Secret mounted as a file,
/// written by a CronJob running `salvo token mint`), and none of its I/O: the caller stats and reads the file when
/// told, and hands over what it found with the time.
///
/// - At start the token must be younger than APNs' hour (and not issued in the future beyond clock skew).
/// - While running, the file is looked at (its identity: device, inode, size, modification time, so a symlink
///   swapped to a new target counts as a change) at most every `checkInterval` seconds, and read again only when
///   that changed. A newer token replaces the current one; an older one, a malformed or unreadable file, or a missing
///   one (a Secret update in progress) keeps the current token.
/// - A token past `warningAge` is reported once.
/// - After APNs answered `ExpiredProviderToken`, the file is looked at at once; without a newer token there the job
///   must stop rather than retry every row with a token that cannot work.
///
/// A value: the clock is the `now` passed to each call (UNIX seconds), so it is tested without files or sleeping.
public struct ProviderTokenFileMonitor: Sendable {
    /// What identifies one version of the file; any change means it is read again.
    public struct Stamp: Hashable, Sendable {
        public var device: UInt64
        public var inode: UInt64
        public var size: Int64
        /// Modification time in nanoseconds since the epoch.
        public var modified: Int64

        public init(device: UInt64, inode: UInt64, size: Int64, modified: Int64) {
            self.device = device
            self.inode = inode
            self.size = size
            self.modified = modified
        }
    }

    /// What to do after looking at the file.
    public enum Look: Hashable, Sendable {
        /// The file is as it was: keep the current token.
        case unchanged
        /// The file changed: read it and pass the result to `read(_:stamp:now:)`.
        case read
    }

    /// What reading the file changed.
    public enum Update: Hashable, Sendable {
        /// A newer token is now current.
        case replaced
        /// The file holds the current token (rewritten, or the same Secret swapped in again).
        case same
        /// The file's token is not newer than the current one, or the file could not be read: the current token
        /// stays, for this reason.
        case kept(String)
    }

    /// The least time between two looks at the file (seconds).
    public static let checkInterval: Int64 = 5
    /// The age (seconds) at which a running job reports that its token is nearly too old: 55 minutes.
    public static let warningAge: Int64 = 55 * 60
    /// The age (seconds) from which APNs refuses a token: an hour.
    public static let maximumAge: Int64 = ProviderToken.lifetime
    /// How far in the future a token's issue time may lie (seconds): APNs refuses one beyond clock skew.
    public static let allowedSkew: Int64 = 5 * 60

    /// The file, for messages.
    public let path: String
    /// The token sent now.
    public private(set) var current: ProviderTokenFileContents
    private var stamp: Stamp
    private var lastLook: Int64
    private var warnedAbout: Int64?
    /// How many times a newer token replaced the current one.
    public private(set) var replacements = 0

    /// Starts with the file's first reading.
    ///
    /// - Throws: `HTTP2ClientError(.credentials)` naming the file when its token is an hour old or older, or issued
    ///   more than five minutes ahead of `now`.
    public init(path: String, contents: ProviderTokenFileContents, stamp: Stamp, now: Int64) throws(HTTP2ClientError) {
        let age = now - contents.issuedAt
        guard age < Self.maximumAge else {
            throw HTTP2ClientError(
                .credentials,
                "the provider token in \(path) was issued \(Self.minutes(age)) ago (iat \(contents.issuedAt)); APNs "
                    + "refuses tokens from 60 minutes of age: mint a new one (salvo token mint), or check that the "
                    + "job refreshing it runs"
            )
        }
        guard -age <= Self.allowedSkew else {
            throw HTTP2ClientError(
                .credentials,
                "the provider token in \(path) is issued \(Self.minutes(-age)) in the future (iat "
                    + "\(contents.issuedAt)); APNs refuses it: this machine's clock or the minting machine's is wrong"
            )
        }
        self.path = path
        self.current = contents
        self.stamp = stamp
        self.lastLook = now
    }

    /// Whether to look at the file now: `checkInterval` after the last look (or when the clock went back).
    public func shouldLook(now: Int64) -> Bool {
        now - self.lastLook >= Self.checkInterval || now < self.lastLook
    }

    /// The file was looked at: `stamp` is what `stat` found, nil when the path is missing or cannot be read (a
    /// Secret's symlink between two targets).
    public mutating func looked(_ stamp: Stamp?, now: Int64) -> Look {
        self.lastLook = now
        guard let stamp, stamp != self.stamp else { return .unchanged }
        return .read
    }

    /// The file was read after `looked` said so: the parsed contents, or why it could not be read or parsed.
    public mutating func read(
        _ result: Result<ProviderTokenFileContents, HTTP2ClientError>,
        stamp: Stamp,
        now: Int64
    ) -> Update {
        // Kept on failure too, so a broken file is reported once, not at every look; whatever rewrites it changes the
        // stamp (writers rename a whole file over it, and Kubernetes swaps a symlink).
        self.stamp = stamp
        let contents: ProviderTokenFileContents
        switch result {
        case .failure(let error):
            return .kept(error.message)
        case .success(let read):
            contents = read
        }
        // ES256 signatures differ each time: a token minted again for the same second is as good as the current one.
        if contents.issuedAt == self.current.issuedAt { return .same }
        guard contents.issuedAt > self.current.issuedAt else {
            return .kept(
                "\(self.path) holds a token issued at \(contents.issuedAt), not after the current one's "
                    + "\(self.current.issuedAt); the current one stays"
            )
        }
        guard contents.issuedAt - now <= Self.allowedSkew else {
            return .kept(
                "\(self.path) holds a token issued \(Self.minutes(contents.issuedAt - now)) in the future; the "
                    + "current one stays"
            )
        }
        self.current = contents
        self.replacements += 1
        return .replaced
    }

    /// A warning, once per token, when the current token has reached `warningAge`; nil otherwise.
    public mutating func warning(now: Int64) -> String? {
        let age = now - self.current.issuedAt
        guard age >= Self.warningAge, self.warnedAbout != self.current.issuedAt else { return nil }
        self.warnedAbout = self.current.issuedAt
        return "the provider token in \(self.path) is \(Self.minutes(age)) old and APNs refuses it at 60 minutes; "
            + "no newer token has arrived there: check that the job refreshing it runs"
    }

    /// After APNs refused `rejected` as expired (and the file was looked at again): send again when a newer
    /// token is current, stop the job when there is none.
    public func renewal(after rejected: ProviderToken.Bearer, now: Int64) -> ProviderToken.Renewal {
        if self.current.issuedAt > rejected.issuedAt { return .renewed }
        let age = now - rejected.issuedAt
        return .refused(
            "APNs answered ExpiredProviderToken for the token in \(self.path) (issued \(Self.minutes(age)) ago) and "
                + "the file holds no newer one: refresh it (salvo token mint) and run the job again"
        )
    }

    /// `age` seconds as minutes and seconds, for messages.
    static func minutes(_ age: Int64) -> String {
        age < 60 ? "\(age) s" : "\(age / 60) min \(age % 60) s"
    }
}
