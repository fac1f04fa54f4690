import SalvoHTTP2
import SalvoRows

/// The channel management calls over one connection, each answered or failed with Apple's reason. Reads, lists
/// and deletes are sent again after 429, 500, 503, a refused stream or a lost answer (with the retry policy's
/// backoff, a bounded number of times): sending them twice changes nothing, and a delete whose first answer was
/// lost and whose second is `ChannelNotRegistered` counts as done.
public struct ChannelClient: Sendable {
    public let exchanger: HTTP2Exchanger
    public let api: ChannelManagement
    public var retry = HTTP2RetryPolicy.default
    /// The longest one call may take, its retries and their pauses included (each request is bounded by the
    /// exchanger's `requestTimeout` too); nil: the retry policy's attempts alone bound it.
    public var giveUp: Duration?
    /// Where the bound is measured and the retries' pauses are waited (a test's `ManualJobClock`).
    public var clock: any JobClock = SystemJobClock()

    public init(exchanger: HTTP2Exchanger, bundleID: String) {
        self.exchanger = exchanger
        self.api = ChannelManagement(bundleID: bundleID)
    }

    /// Every channel id of the app.
    public func list() async -> Result<[String], ChannelFailure> {
        await self.repeating(self.api.list(), ChannelManagement.channels)
    }

    /// One channel's storage policy.
    public func read(_ id: String) async -> Result<MessageStoragePolicy, ChannelFailure> {
        guard ChannelID.isWellFormed(id) else { return .failure(Self.badID(id)) }
        return await self.repeating(self.api.read(channelID: id), ChannelManagement.readPolicy)
    }

    /// Deletes one channel.
    public func delete(_ id: String) async -> Result<Void, ChannelFailure> {
        guard ChannelID.isWellFormed(id) else { return .failure(Self.badID(id)) }
        var lostBefore = false
        var attempts = 0
        let start = self.clock.now
        while true {
            attempts += 1
            let failure: ChannelFailure
            switch await self.exchanger.exchange(self.api.delete(channelID: id)) {
            case .answered(let response):
                switch ChannelManagement.deleted(response) {
                case .success: return .success(())
                case .failure(let refused):
                    if lostBefore && refused.reason == "ChannelNotRegistered" { return .success(()) }
                    failure = refused
                }
            case .notProcessed(let why):
                failure = ChannelFailure(status: nil, reason: why)
            case .lost(let why):
                lostBefore = true
                failure = ChannelFailure(status: nil, reason: why)
            }
            guard failure.status == nil || failure.isRetryable, self.retry.allowsRetry(after: attempts),
                self.exchanger.isActive
            else { return .failure(failure) }
            if let late = self.outOfTime(failure, since: start, attempts: attempts) { return .failure(late) }
            await self.pause(attempts: attempts)
        }
    }

    /// One create, sent once: its outcome decides whether the name has a channel, none, or an unknown one.
    public func create(policy: MessageStoragePolicy) async -> CreateOutcome {
        switch await self.exchanger.exchange(self.api.create(policy: policy)) {
        case .answered(let response):
            switch ChannelManagement.createdChannel(response) {
            case .success(let id): return .created(id)
            case .failure(let failure):
                // 429 is a refusal before any work; a 5xx may come after the channel was made.
                if failure.status == 429 { return .notCreated(failure) }
                if failure.isRetryable { return .unknown(failure.description) }
                return .refused(failure)
            }
        case .notProcessed(let why):
            return .notCreated(ChannelFailure(status: nil, reason: why))
        case .lost(let why):
            return .unknown(why)
        }
    }

    public enum CreateOutcome: Sendable {
        /// 201 with this id.
        case created(String)
        /// Refused for good with Apple's reason: nothing was made.
        case refused(ChannelFailure)
        /// Refused for now (429, a refused stream): nothing was made; it may be sent again.
        case notCreated(ChannelFailure)
        /// No answer that says (a timeout, a lost connection, a 5xx): reconciliation decides.
        case unknown(String)
    }

    private func repeating<Value>(
        _ request: HTTP2Request,
        _ decode: (HTTP2Response) -> Result<Value, ChannelFailure>
    ) async -> Result<Value, ChannelFailure> {
        var attempts = 0
        let start = self.clock.now
        while true {
            attempts += 1
            let failure: ChannelFailure
            switch await self.exchanger.exchange(request) {
            case .answered(let response):
                let result = decode(response)
                guard case .failure(let refused) = result else { return result }
                failure = refused
            case .notProcessed(let why), .lost(let why):
                failure = ChannelFailure(status: nil, reason: why)
            }
            guard failure.status == nil || failure.isRetryable, self.retry.allowsRetry(after: attempts),
                self.exchanger.isActive
            else { return .failure(failure) }
            if let late = self.outOfTime(failure, since: start, attempts: attempts) { return .failure(late) }
            await self.pause(attempts: attempts)
        }
    }

    /// `failure`, saying the call gave up, when another attempt would begin past `giveUp`; nil while time is left.
    private func outOfTime(
        _ failure: ChannelFailure,
        since start: UInt64,
        attempts: Int
    )
        -> ChannelFailure?
    {
        guard let giveUp = self.giveUp, self.clock.now &- start >= giveUp.nanoseconds else { return nil }
        var late = failure
        late.reason += " (gave up after \(attempts) attempts in \(giveUp.components.seconds) s)"
        return late
    }

    func pause(attempts: Int) async {
        let nanoseconds = self.retry.delay(attempts: attempts, retryAfter: nil, random: Double.random(in: 0..<1))
        await self.clock.sleep(nanoseconds: nanoseconds)
    }

    static func badID(_ id: String) -> ChannelFailure {
        ChannelFailure(
            status: nil,
            reason: "'\(id)' is not a base64 channel id (not sent: APNs would answer BadChannelId)"
        )
    }
}
