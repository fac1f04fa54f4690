import APNSWire
import NIOHPACK

/// What each request on one HTTP/2 connection gets from the checks, as APNs answers: the verdict on its
/// credentials (a provider token's, cached per connection, and the connection's binding to a key), the refusal
/// `HTTP2RequestCheck` gives, the plan's refusal of its token (invalid, of another app, uninstalled, expired), and
/// its `apns-id`, echoed or made.
///
/// A value: the faults' errors (`HTTP2ConnectionFaults`) come after these, and the connection
/// (`HTTP2GatewayHandler`) records what is accepted and writes the answers.
struct HTTP2Answers {
    /// The fields of a request's header block that decide its answer.
    struct Request {
        var method: String?
        var path: String?
        var authorization: String?
        var apnsID: String?

        init(_ headers: HPACKHeaders) {
            for header in headers {
                switch header.name {
                case ":method": self.method = header.value
                case ":path": self.path = header.value
                case "authorization": self.authorization = header.value
                case "apns-id": self.apnsID = header.value
                default: break
                }
            }
        }
    }

    /// What `HTTP2RequestCheck` makes of a request.
    enum Checked {
        /// Refused; a malformed `apns-id` is not echoed (`echoesID` false): the service makes one.
        case refused(HTTP2Answer, echoesID: Bool)
        case passed(HTTP2RequestCheck.Passed)
    }

    /// The shared plan: its invalid tokens (listed, seeded fraction, other environment) answer BadDeviceToken, as
    /// they answer status 8 on the binary gateway; its tokens of another app answer DeviceTokenNotForTopic.
    let plan: CompiledFaultPlan
    /// Uninstalled tokens and since when (UNIX seconds), per topic.
    let uninstalled: [String: [DeviceToken: UInt32]]
    let verifier: ProviderTokenVerifier
    let clock: any SimulatorClock
    private var cachedToken: (text: String, verdict: Result<ProviderTokenVerifier.Accepted, APNSReason>)?
    /// The key of the first provider token accepted on this connection.
    private var connectionKeyID: String?
    private var apnsIDs = APNSIDMaker()

    init(
        plan: CompiledFaultPlan,
        uninstalled: [String: [DeviceToken: UInt32]],
        verifier: ProviderTokenVerifier,
        clock: any SimulatorClock
    ) {
        self.plan = plan
        self.uninstalled = uninstalled
        self.verifier = verifier
        self.clock = clock
    }

    /// A request's credentials: its provider token's verdict when it carries one, else the connection's client
    /// certificate, else none.
    mutating func credentials(of request: Request, peer: PeerTopic?) -> HTTP2RequestCheck.Credentials {
        if let authorization = request.authorization { return .token(self.verify(authorization)) }
        if let peer { return .certificate(peer) }
        return .none
    }

    /// The checks' verdict on a notification request.
    func check(
        _ request: Request,
        headers: HPACKHeaders,
        credentials: HTTP2RequestCheck.Credentials,
        payloadBytes: Int
    ) -> Checked {
        let checked = HTTP2RequestCheck.check(
            method: request.method,
            path: request.path,
            fields: headers.lazy.map { (name: $0.name, value: $0.value) },
            credentials: credentials,
            payloadBytes: payloadBytes
        )
        switch checked {
        case .failure(let reason): return .refused(.refused(reason), echoesID: reason != .badMessageId)
        case .success(let passed): return .passed(passed)
        }
    }

    /// The plan's refusal of a request that passed the checks, for its token; nil: the plan has none.
    func refusal(of passed: HTTP2RequestCheck.Passed) -> HTTP2Answer? {
        if passed.token.withUnsafeBytes({ self.plan.isInvalid($0.baseAddress!) }) {
            return .refused(.badDeviceToken)
        }
        if passed.token.withUnsafeBytes({ self.plan.isForeignToTopic($0.baseAddress!) }) {
            return .refused(.deviceTokenNotForTopic)
        }
        if let since = self.uninstalled[passed.topic]?[passed.token] {
            return .refused(.unregistered, timestamp: Int64(since) * 1000)
        }
        if passed.token.withUnsafeBytes({ self.plan.expiredTokens.contains($0.baseAddress!) }) {
            return .refused(.expiredToken, timestamp: Int64(self.clock.now()) * 1000)
        }
        return nil
    }

    /// Calls `body` with an answer's `apns-id`: the request's `echoed` one, or else a new one drawn from `random`
    /// (the connection's seeded sequence, `HTTP2ConnectionFaults.random`).
    mutating func withAPNSID<Result>(
        echoing echoed: String?,
        using random: inout SeededGenerator,
        _ body: (UnsafeRawBufferPointer) -> Result
    ) -> Result {
        if var echoed {
            return echoed.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        }
        return self.apnsIDs.withNext(using: &random, body)
    }

    /// The verdict on a provider token (`checkToken`), and the connection's binding to a key: the key of the first
    /// token accepted on a connection is its key, and a token signed by another key (a team-scoped key, then a
    /// topic-specific one) is refused with UnrelatedKeyIdInToken; a new connection takes it.
    private mutating func verify(_ authorization: String) -> Result<ProviderTokenVerifier.Accepted, APNSReason> {
        let verdict = self.checkToken(authorization)
        guard case .success(let accepted) = verdict else { return verdict }
        if let bound = self.connectionKeyID, bound != accepted.keyID { return .failure(.unrelatedKeyIdInToken) }
        self.connectionKeyID = accepted.keyID
        return verdict
    }

    /// The verdict on a provider token, cached for the exact text last seen: the signature is checked once per
    /// token and connection, its age on every request.
    private mutating func checkToken(_ authorization: String) -> Result<ProviderTokenVerifier.Accepted, APNSReason> {
        if let cached = self.cachedToken, cached.text == authorization {
            if case .success(let accepted) = cached.verdict,
                Int64(self.clock.now()) - accepted.issuedAt > ProviderTokenVerifier.maximumAge
            {
                return .failure(.expiredProviderToken)
            }
            return cached.verdict
        }
        guard authorization.hasPrefix("bearer ") else { return .failure(.invalidProviderToken) }
        let verdict = self.verifier.check(authorization.dropFirst("bearer ".count))
        self.cachedToken = (authorization, verdict)
        return verdict
    }
}
