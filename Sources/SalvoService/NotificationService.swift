import APNSWire
import CoreMetrics
import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoHTTP2
import SalvoRows

/// The service: requests' notifications into the store, durably, in shared write cycles; the store's queued rows
/// into the same HTTP/2 job `salvo send` runs (`HTTP2Job.serve`), over warm connections; the job's answers back
/// into the store; and the waits of requests that want the outcome. The HTTP API (`SalvoServer`) is a shell
/// around it.
///
/// Two tasks do the work: the writer (one store cycle at a time: accepts, outcomes, claims) and the sender (the
/// HTTP/2 job, started again after it stops). Requests only enqueue and wait; nothing here blocks a thread.
public final class NotificationService: Sendable {
    public let configuration: ServiceConfiguration
    let store: any NotificationStore
    private let waiters = OutcomeWaiters()
    private let state: NIOLockedValueBox<State>
    private let loop: any EventLoop
    private let timers: LoopTimers
    private let group: MultiThreadedEventLoopGroup
    private let jobStop: NIOLockedValueBox<JobStop?> = NIOLockedValueBox(nil)
    private let logger: Logger
    private let metrics: ServiceMetrics
    /// What the sending job did with each row, kept across a kill (nil: every row handed out and unreported at a
    /// restart counts as written).
    private let marks: ServiceMarks?
    /// Succeeded when the writer has written its last cycle.
    private let writerEnded: EventLoopPromise<Void>
    /// The leases of the rows this worker holds, for a store shared by workers (nil for one node's store): asked by
    /// the sending job before every write (`LeaseGate`).
    private let leases: NIOLockedValueBox<LeaseBook>?
    private let gate: LeaseGate?
    /// The lease loop's pause, ended early when a commit was fenced (`renewSoon`).
    private let leasePause = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)

    private struct InFlight {
        var seq: Int
        var id: String
        var acceptedAt: Int64
    }

    private struct PendingRequest {
        var accept: PendingAccept
        var continuation: CheckedContinuation<Result<AcceptResult, StoreFailure>, Never>
    }

    private struct State {
        var accepts: [PendingRequest] = []
        var outcomes: [OutcomeUpdate] = []
        /// Claim rows for the feed in the next cycle.
        var wantsClaim = false
        /// The writer, suspended until there is work.
        var wake: CheckedContinuation<Void, Never>?
        /// Notifications not final, with those reserved by requests not yet stored.
        var depth = 0
        /// Rows handed to the job, by their line in it (`ServiceMarks.line`).
        var inFlight: [Int: InFlight] = [:]
        var feed: ServiceFeed?
        var templates: [String: ServiceTemplate] = [:]
        var keys: [[UInt8]: APIKeyRecord] = [:]
        /// When `keys` were read from the store (milliseconds since 1970).
        var keysLoadedAt: Int64 = 0
        var stopping = false
        /// The sender has ended for good (the service stops).
        var senderEnded = false
        /// The store's last write failed (readiness).
        var storeProblem: String?
        /// Why the sending job last stopped, until it answers again (readiness).
        var senderProblem: String?
        var recovered = StoreRecovery()
        /// The transactional traffic as the console shows it.
        var activity = ServiceActivity()
    }

    /// Opens the service on `store`: recovers the rows a stopped service was sending, loads templates and keys, and
    /// starts the writer and the sender.
    public static func start(
        configuration: ServiceConfiguration,
        store: any NotificationStore,
        marks: ServiceMarks? = nil,
        logger: Logger = Logger(label: "salvo.service", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws(StoreFailure) -> NotificationService {
        let recovery = try await store.recover(
            onUncertain: configuration.onUncertain,
            now: configuration.now(),
            marks: marks?.marks(),
            webhooks: configuration.webhooks
        )
        if recovery.answered > 0 { configuration.webhookEventsWritten?() }
        // Every row the marks told about is settled in the store now: the ring starts empty.
        if let marks { await BlockingWork.run { marks.clear() } }
        let templates = try await store.allTemplates()
        let keys = try await store.apiKeys()
        let service = NotificationService(configuration: configuration, store: store, marks: marks, logger: logger)
        service.state.withLockedValue { state in
            state.depth = recovery.depth
            state.recovered = recovery
            for template in templates { state.templates[template.name] = template }
            for key in keys where key.revokedAt == nil { state.keys[key.hash] = key }
            state.keysLoadedAt = configuration.now()
        }
        if recovery.uncertain > 0 {
            logger.warning(
                "rows were being sent when the service stopped",
                metadata: [
                    "rows": "\(recovery.uncertain)", "on_uncertain": "\(configuration.onUncertain.rawValue)",
                ]
            )
            service.metrics.uncertainAfterRestart.increment(by: recovery.uncertain)
        }
        service.metrics.depth.record(recovery.depth)
        Task { await service.writerLoop() }
        Task { await service.senderLoop() }
        if let marks { Task { await service.marksLoop(marks) } }
        if let every = store.leaseRenewal { Task { await service.leaseLoop(every: every) } }
        service.metrics.storeUp.record(1)
        Task { await service.healthLoop() }
        if store.lease != nil {
            Task { await service.pollLoop() }
            store.watchQueue { [weak service] in service?.queueSignalled() }
        }
        return service
    }

    private init(
        configuration: ServiceConfiguration,
        store: any NotificationStore,
        marks: ServiceMarks?,
        logger: Logger
    ) {
        self.configuration = configuration
        self.marks = marks
        self.store = store
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.loop = self.group.next()
        self.timers = LoopTimers(loop: self.loop)
        self.writerEnded = self.loop.makePromise(of: Void.self)
        self.state = NIOLockedValueBox(State())
        let metrics = ServiceMetrics()
        self.metrics = metrics
        if let lease = store.lease {
            let leases = NIOLockedValueBox(LeaseBook(lease: lease))
            self.leases = leases
            self.gate = LeaseGate(leases: leases, now: configuration.now, metrics: metrics)
        } else {
            self.leases = nil
            self.gate = nil
        }
    }

    /// What the last restart found: rows being sent when the service stopped.
    public var recovery: StoreRecovery { self.state.withLockedValue { $0.recovered } }

    /// Notifications not final (queued or being sent).
    public var depth: Int { self.state.withLockedValue { $0.depth } }

    /// The transactional traffic so far: counts, refusals by reason, rates per second, latencies.
    public var activity: ServiceActivity { self.state.withLockedValue { $0.activity } }

    /// Whether the service is shutting down (its API answers 503 from then on).
    public var isStopping: Bool { self.state.withLockedValue { $0.stopping } }

    // MARK: Requests

    /// An answer to a request: status, JSON body, and the headers that go with it.
    public struct Answer: Sendable {
        public var status: Int
        public var body: [UInt8]
        /// The first answer of a repeated idempotency key.
        public var replayed = false
        public var retryAfter: Int?
        public var isProblem: Bool

        init(status: Int, body: [UInt8], replayed: Bool = false) {
            self.status = status
            self.body = body
            self.replayed = replayed
            self.isProblem = false
        }

        init(_ problem: ServiceProblem) {
            self.status = problem.status
            self.body = problem.json
            self.retryAfter = problem.retryAfter
            self.isProblem = true
        }
    }

    /// Takes a request's notifications (`POST /v1/notifications`): answers once the accepted ones are durable.
    public func submit(keyID: String, idempotencyKey: String?, body: [UInt8]) async -> Answer {
        if let key = idempotencyKey, !Self.isValidIdempotencyKey(key) {
            return Answer(
                ServiceProblem(
                    .badRequest,
                    detail: "Idempotency-Key must be 1 to 255 visible ASCII characters",
                    field: "Idempotency-Key"
                )
            )
        }
        guard !self.state.withLockedValue({ $0.stopping }) else {
            return Answer(ServiceProblem(.unavailable, detail: "the service is shutting down", retryAfter: 5))
        }
        let templates = self.state.withLockedValue { $0.templates }
        // A request's ids from one generator seeded by the system once (a system call per id cost 8% of a busy
        // service's time): 128 random bits of seed, and 74 random bits in every id beside its millisecond.
        var ids = SplitMix128(seed: SystemRandomNumberGenerator())
        let milliseconds = self.configuration.now()
        // The notifications' ids are the batch's by index: a store finds one by its batch (`NotificationIDs`).
        let batchID = NotificationIDs.batch(milliseconds: milliseconds, using: &ids)
        var index = 0
        let batch: NotificationBatch
        do {
            batch = try NotificationBatch.read(
                body,
                defaults: self.configuration.defaults,
                templates: { templates[$0] },
                makeID: {
                    defer { index += 1 }
                    return NotificationIDs.notification(batch: batchID, index: index)
                }
            )
        } catch {
            return Answer(error)
        }
        let accepted = batch.accepted
        let refusals = batch.refusals
        self.metrics.refused(refusals)
        if !refusals.isEmpty { self.state.withLockedValue { $0.activity.refuseWhenPosted(refusals.count) } }
        guard !accepted.isEmpty else {
            return Answer(
                ServiceProblem(
                    .invalidNotifications,
                    detail: "every notification of the request was refused",
                    errors: refusals
                )
            )
        }
        let limit = self.configuration.queueLimit
        let reserved = self.state.withLockedValue { state -> Bool in
            guard state.depth + accepted.count <= limit else { return false }
            state.depth += accepted.count
            return true
        }
        guard reserved else {
            return Answer(
                ServiceProblem(
                    .queueFull,
                    detail: "the queue holds its limit of \(limit) notifications not yet sent; try again shortly",
                    retryAfter: 1
                )
            )
        }
        let answerBody = Self.acceptedBody(batch: batchID, batch)
        let accept = PendingAccept(
            keyID: keyID,
            idempotencyKey: idempotencyKey,
            // Only a key's requests are compared with a retry's body.
            bodyHash: idempotencyKey == nil ? [] : Array(SHA256.hash(data: body)),
            batch: batchID,
            notifications: accepted,
            answer: StoredAnswer(status: 202, body: answerBody)
        )
        let result = await withCheckedContinuation { continuation in
            let wake = self.state.withLockedValue { state in
                state.accepts.append(PendingRequest(accept: accept, continuation: continuation))
                return Self.takeWake(&state)
            }
            wake?.resume()
        }
        switch result {
        case .success(.stored):
            self.metrics.accepted.increment(by: accepted.count)
            let at = self.configuration.now()
            self.state.withLockedValue { $0.activity.accept(accepted.count, at: at) }
            return Answer(status: 202, body: answerBody)
        case .success(.replay(let answer)):
            self.release(accepted.count)
            return Answer(status: answer.status, body: answer.body, replayed: true)
        case .success(.conflict):
            self.release(accepted.count)
            return Answer(
                ServiceProblem(
                    .idempotencyConflict,
                    detail:
                        "Idempotency-Key \(NotificationBatch.shown(idempotencyKey ?? "")) was used with another body",
                    field: "Idempotency-Key"
                )
            )
        case .failure(let failure):
            self.release(accepted.count)
            return Answer(
                ServiceProblem(.unavailable, detail: "the store cannot write: \(failure.message)", retryAfter: 5)
            )
        }
    }

    private func release(_ count: Int) {
        self.state.withLockedValue { $0.depth -= count }
    }

    static func isValidIdempotencyKey(_ key: String) -> Bool {
        (1...255).contains(key.utf8.count) && key.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
    }

    /// A notification's outcome (`GET /v1/notifications/{id}`), after waiting up to `wait` seconds for it to be
    /// final.
    public func notification(id: String, wait: Double) async -> Result<NotificationRecord, ServiceProblem> {
        let id = id.lowercased()
        do {
            if wait > 0 {
                await self.waiters.wait(for: [id], timeout: Self.timeAmount(wait), timers: self.timers) {
                    let records = try? await self.store.notifications(ids: [id])
                    return Set(records?.filter { !$0.state.isFinal }.map(\.id) ?? [])
                }
            }
            guard let record = try await self.store.notifications(ids: [id]).first else {
                return .failure(ServiceProblem(.notFound, detail: "no notification \(id)"))
            }
            return .success(record)
        } catch {
            return .failure(ServiceProblem(.unavailable, detail: "the store cannot read: \(error.message)"))
        }
    }

    /// A batch's notifications (`GET /v1/batches/{id}`), after waiting up to `wait` seconds for all to be final.
    public func batch(id: String, wait: Double) async -> Result<[NotificationRecord], ServiceProblem> {
        let id = id.lowercased()
        do {
            let first = try await self.store.batch(id)
            guard !first.isEmpty else { return .failure(ServiceProblem(.notFound, detail: "no batch \(id)")) }
            let open = Set(first.filter { !$0.state.isFinal }.map(\.id))
            guard wait > 0, !open.isEmpty else { return .success(first) }
            await self.waiters.wait(for: open, timeout: Self.timeAmount(wait), timers: self.timers) {
                let records = try? await self.store.notifications(ids: Array(open))
                return Set(records?.filter { !$0.state.isFinal }.map(\.id) ?? [])
            }
            return .success(try await self.store.batch(id))
        } catch {
            return .failure(ServiceProblem(.unavailable, detail: "the store cannot read: \(error.message)"))
        }
    }

    private static func timeAmount(_ seconds: Double) -> TimeAmount { .nanoseconds(Int64(seconds * 1e9)) }

    // MARK: Templates and keys

    public func putTemplate(name: String, body: [UInt8]) async -> Result<ServiceTemplate, ServiceProblem> {
        guard ServiceTemplate.isValidName(name) else {
            return .failure(
                ServiceProblem(.badRequest, detail: "a template name is 1 to 64 of A-Z a-z 0-9 . _ -", field: "name")
            )
        }
        let template: ServiceTemplate
        do {
            template = try ServiceTemplate(name: name, text: body)
        } catch {
            return .failure(ServiceProblem(.badRequest, detail: error.reason, field: "template"))
        }
        do {
            try await self.store.putTemplate(template, now: self.configuration.now())
        } catch {
            return .failure(ServiceProblem(.unavailable, detail: "the store cannot write: \(error.message)"))
        }
        self.state.withLockedValue { $0.templates[name] = template }
        return .success(template)
    }

    public func template(name: String) -> ServiceTemplate? {
        self.state.withLockedValue { $0.templates[name] }
    }

    public func deleteTemplate(name: String) async -> Result<Bool, ServiceProblem> {
        do {
            let existed = try await self.store.deleteTemplate(named: name)
            self.state.withLockedValue { _ = $0.templates.removeValue(forKey: name) }
            return .success(existed)
        } catch {
            return .failure(ServiceProblem(.unavailable, detail: "the store cannot write: \(error.message)"))
        }
    }

    /// The id of the API key `bearer` is, when it is an active key. A key unknown here is looked up in the store
    /// (made by `salvo serve keys create` while the service runs); a revoked one is refused once the store says so.
    public func keyID(bearer: String) async -> String? {
        let hash = APIKeys.hash(bearer)
        let now = self.configuration.now()
        let known = self.state.withLockedValue { state -> APIKeyRecord?? in
            guard now - state.keysLoadedAt < Self.keysFreshFor else { return .none }
            return .some(state.keys[hash])
        }
        // Held keys answer for a second after they were read (a read of the store per request would cost every
        // request of one notification a hop to a reading connection); past that, and for a key not held, the store
        // is read again, so a key revoked by `salvo serve keys revoke` while the service runs is refused within a
        // second.
        if case .some(.some(let key)) = known { return key.id }
        // While the store cannot be read (a database restarting), the keys held answer: a request with a good key
        // is answered 503 by the store, which its client retries, never 401, which it would not. A revocation made
        // meanwhile takes effect once the store answers again.
        let failing = self.state.withLockedValue { $0.storeProblem != nil }
        if !failing, let keys = await self.loadKeys(now: now) { return keys.values.first { $0.hash == hash }?.id }
        return self.state.withLockedValue { $0.keys[hash]?.id }
    }

    /// How long keys read from the store are trusted, in milliseconds.
    public static let keysFreshFor: Int64 = 1000

    /// Whether the key with this id is active, as the store says now (a key revoked by `salvo serve keys revoke`
    /// while the service runs is not): the console asks it for every page, so a revoked key's sessions end. The
    /// keys held in memory are refreshed from the same read.
    public func isActiveKey(id: String) async -> Bool {
        guard let keys = await self.loadKeys(now: self.configuration.now()) else { return false }
        return keys.values.contains { $0.id == id }
    }

    /// Drops the keys held in memory, so that a revocation made elsewhere takes effect at the next request.
    public func reloadKeys() async {
        _ = await self.loadKeys(now: self.configuration.now())
    }

    /// Reads the active keys from the store and holds them, as of `now`.
    /// - Returns: the active keys by their hash; nil when the store cannot be read (the keys held stay, and the store
    ///   is read again at the next request).
    private func loadKeys(now: Int64) async -> [[UInt8]: APIKeyRecord]? {
        guard let keys = try? await self.store.apiKeys() else { return nil }
        return self.state.withLockedValue { state in
            state.keys.removeAll()
            for key in keys where key.revokedAt == nil { state.keys[key.hash] = key }
            state.keysLoadedAt = now
            return state.keys
        }
    }

    // MARK: Readiness

    public struct Readiness: Sendable {
        public var store: String?
        public var sender: String?
        public var isReady: Bool { self.store == nil && self.sender == nil }
    }

    /// What keeps the service from its work: the store's last failure, the sending job's last stop. While no
    /// failure is known the store is asked for a small write, answered within `readinessBound` (a database that does
    /// not answer is not ready: its calls would wait their own, longer bound).
    public func readiness() async -> Readiness {
        var readiness = self.state.withLockedValue { Readiness(store: $0.storeProblem, sender: $0.senderProblem) }
        if readiness.store == nil, let problem = await self.probeStore() {
            readiness.store = problem
            self.storeFailed(problem)
        }
        if self.state.withLockedValue({ $0.stopping }) { readiness.sender = "shutting down" }
        return readiness
    }

    /// How long a readiness check waits for the store.
    public static let readinessBound = Duration.seconds(2)

    /// A small write to the store, within `readinessBound`: nil when it answered, else why not.
    private func probeStore() async -> String? {
        let bound = Self.readinessBound
        return await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let once = NIOLockedValueBox<CheckedContinuation<String?, Never>?>(continuation)
            let take = { @Sendable () -> CheckedContinuation<String?, Never>? in
                once.withLockedValue { taken in
                    defer { taken = nil }
                    return taken
                }
            }
            let store = self.store
            Task {
                var problem: String?
                do throws(StoreFailure) {
                    try await store.checkWritable()
                } catch {
                    problem = error.message
                }
                take()?.resume(returning: problem)
            }
            self.timers.schedule(in: .nanoseconds(Int64(bound.components.seconds) * 1_000_000_000)) {
                take()?.resume(returning: "the store does not answer within \(bound.components.seconds) s")
            }
        }
    }

    /// The store failed a call: not ready, and no claim, until a call succeeds again.
    private func storeFailed(_ problem: String) {
        self.state.withLockedValue { $0.storeProblem = problem }
        self.metrics.storeUp.record(0)
    }

    /// The store answered a call: ready again; a worker that stopped claiming while it was gone claims at once.
    private func storeAnswered() {
        let was = self.state.withLockedValue { state -> String? in
            defer { state.storeProblem = nil }
            return state.storeProblem
        }
        if let was {
            self.metrics.storeUp.record(1)
            self.logger.notice("the store answers again", metadata: ["was": "\(was)"])
            self.kick(claim: true)
        }
    }

    // MARK: Shutdown

    /// Stops taking requests, gives the rows in flight the configuration's `shutdownGrace` to be answered, records
    /// what became of every row (unanswered ones per `onUncertain`), and closes the store. Queued rows stay for the
    /// next start.
    public func shutdown() async {
        let already = self.state.withLockedValue { state -> Bool in
            defer { state.stopping = true }
            return state.stopping
        }
        guard !already else {
            try? await self.writerEnded.futureResult.get()
            return
        }
        // Held answers go at once (with the state of the moment); the API takes no new wait from here on.
        self.waiters.endAll()
        self.renewSoon()
        let job = self.jobStop.withLockedValue { $0 }
        job?.request(reason: "the service is shutting down")
        _ = self.state.withLockedValue { $0.feed }?.close()
        self.kick()
        // The sender ends within the stop's grace (and the job's bounded close); the writer then records its last
        // answers and ends.
        try? await self.writerEnded.futureResult.get()
        self.waiters.endAll()
        await self.store.close()
        self.timers.close()
        try? await self.group.shutdownGracefully()
    }

    // MARK: Writer

    private static func takeWake(_ state: inout State) -> CheckedContinuation<Void, Never>? {
        defer { state.wake = nil }
        return state.wake
    }

    private func kick(claim: Bool = false) {
        let wake = self.state.withLockedValue { state in
            if claim { state.wantsClaim = true }
            return Self.takeWake(&state)
        }
        wake?.resume()
    }

    /// One cycle at a time, each holding everything that arrived while the last one was written.
    private func writerLoop() async {
        var failures = 0
        while true {
            let (accepts, outcomes, claim, feed, done) = await self.nextWork()
            if done { break }
            var cycle = StoreCycle(now: self.configuration.now())
            cycle.accepts = accepts.map(\.accept)
            cycle.outcomes = outcomes
            // While the store fails, nothing more is claimed: what this worker holds is finished or given back, and
            // claims start again with the first cycle the store answers.
            let storeUp = self.state.withLockedValue { $0.storeProblem == nil }
            cycle.claim = claim && storeUp ? feed?.wanted ?? 0 : 0
            if let leases = self.leases, !outcomes.isEmpty {
                leases.withLockedValue { $0.settling(outcomes.map(\.seq)) }
            }
            cycle.webhooks = self.configuration.webhooks
            cycle.onUncertain = self.configuration.onUncertain
            do {
                let result = try await self.store.write(cycle)
                if !cycle.webhooks.isEmpty, !outcomes.isEmpty || !result.expired.isEmpty {
                    self.configuration.webhookEventsWritten?()
                }
                failures = 0
                for (request, outcome) in zip(accepts, result.accepts) {
                    request.continuation.resume(returning: .success(outcome))
                }
                self.finish(outcomes, result: result, feed: feed, at: cycle.now)
                self.storeAnswered()
            } catch {
                failures += 1
                self.logger.error("the store cannot write", metadata: ["cause": "\(error.message)"])
                for request in accepts { request.continuation.resume(returning: .failure(error)) }
                // The outcomes are kept for the next cycle; the wait between attempts is bounded and grows.
                self.storeFailed(error.message)
                self.state.withLockedValue { state in
                    state.outcomes.insert(contentsOf: outcomes, at: 0)
                }
                try? await Task.sleep(for: .milliseconds(min(2000, 50 << min(failures, 6))))
            }
        }
        self.writerEnded.succeed()
    }

    /// Waits for work: requests, outcomes, or a claim the feed wants. `done` once the service stops and the sender
    /// has ended with nothing left to write.
    private func nextWork() async -> ([PendingRequest], [OutcomeUpdate], Bool, ServiceFeed?, Bool) {
        while true {
            let taken = self.state.withLockedValue {
                state -> ([PendingRequest], [OutcomeUpdate], Bool, ServiceFeed?, Bool)? in
                // Every cycle with a sender running claims what its feed wants: new rows go out in the cycle that
                // stores them, rows given back in the one that queues them again.
                let claim = state.feed != nil
                if !state.accepts.isEmpty || !state.outcomes.isEmpty || (state.wantsClaim && claim) {
                    defer {
                        state.accepts.removeAll()
                        state.outcomes.removeAll()
                        state.wantsClaim = false
                    }
                    return (state.accepts, state.outcomes, claim, state.feed, false)
                }
                if state.stopping && state.feed == nil && state.senderEnded { return ([], [], false, nil, true) }
                return nil
            }
            if let taken { return taken }
            await withCheckedContinuation { continuation in
                let now = self.state.withLockedValue { state -> Bool in
                    let ready =
                        !state.accepts.isEmpty || !state.outcomes.isEmpty || (state.wantsClaim && state.feed != nil)
                        || (state.stopping && state.feed == nil && state.senderEnded)
                    if !ready { state.wake = continuation }
                    return ready
                }
                if now { continuation.resume() }
            }
        }
    }

    /// After a cycle written at `at`: the rows claimed go to the feed (their leases in the book first), final rows
    /// leave the depth and wake their waiters.
    private func finish(_ outcomes: [OutcomeUpdate], result: StoreCycleResult, feed: ServiceFeed?, at: Int64) {
        let now = self.configuration.now()
        var finalIDs: [String] = []
        var latencies: [Int64] = []
        // By index, each field read in place: a row taken whole out of the array is a copy of all its references.
        let claimed = result.claimed
        if let marks = self.marks { for index in claimed.indices { marks.handOut(claimed[index].seq) } }
        if let leases = self.leases {
            leases.withLockedValue { book in
                book.settled(outcomes.filter { $0.state != .sending }.map(\.seq) + result.fenced)
                book.claimed(result.claimed.map(\.seq), at: at)
            }
        }
        let items = self.state.withLockedValue { state -> [HTTP2WorkItem] in
            for outcome in outcomes {
                let line = ServiceMarks.line(outcome.seq)
                guard let entry = state.inFlight.removeValue(forKey: line) else { continue }
                guard entry.seq == outcome.seq else {
                    state.inFlight[line] = entry
                    continue
                }
                if outcome.state.isFinal {
                    finalIDs.append(entry.id)
                    state.depth -= 1
                    let latency = outcome.state == .delivered ? now - entry.acceptedAt : nil
                    if let latency { latencies.append(latency) }
                    state.activity.settle(
                        outcome.state,
                        status: outcome.status,
                        reason: outcome.reason,
                        latency: latency,
                        at: now
                    )
                }
            }
            for expired in result.expired + result.uncertain {
                finalIDs.append(expired.id)
                state.depth -= 1
                state.activity.settle(.expired, at: now)
            }
            for index in claimed.indices {
                let seq = claimed[index].seq
                state.inFlight[ServiceMarks.line(seq)] = InFlight(
                    seq: seq,
                    id: claimed[index].notification.id,
                    acceptedAt: claimed[index].acceptedAt
                )
            }
            return Self.workItems(result.claimed)
        }
        if !items.isEmpty, let feed, !feed.push(items) {
            // The feed closed meanwhile (the sender stopped): the rows go back to the queue next cycle.
            self.requeue(items)
        }
        if !result.fenced.isEmpty {
            self.logger.warning(
                "rows taken over by another worker after their lease expired: their outcomes here were refused",
                metadata: ["rows": "\(result.fenced.count)"]
            )
            self.metrics.fenced.increment(by: result.fenced.count)
            // Other rows of the same lease may be lost too: the renewal finds them now, before they are written.
            self.renewSoon()
        }
        self.metrics.outcomes(outcomes, expired: result.expired.count)
        for latency in latencies { self.metrics.endToEnd.recordMilliseconds(latency) }
        self.metrics.depth.record(self.depth)
        if !finalIDs.isEmpty { self.waiters.settled(finalIDs) }
        // Rows were there to claim, and the feed takes more: claim again rather than wait for it to run low.
        if let feed, !result.claimed.isEmpty, feed.wanted > feed.target / 2 { self.kick(claim: true) }
    }

    /// The claimed rows as the job's work items: every body a slice of one buffer for the claim (one allocation per
    /// claim, none per row, as `TokenSource` does for a chunk's rendered payloads; the buffer is whole before the
    /// first slice is cut, so no slice copies it).
    static func workItems(_ rows: [ClaimedRow]) -> [HTTP2WorkItem] {
        // By index, each field read in place (a row taken whole out of the array is a copy of all its references).
        var total = 0
        for index in rows.indices { total += rows[index].notification.payload.count }
        var buffer = ByteBufferAllocator().buffer(capacity: total)
        for index in rows.indices { buffer.writeBytes(rows[index].notification.payload) }
        var items: [HTTP2WorkItem] = []
        items.reserveCapacity(rows.count)
        var start = 0
        for index in rows.indices {
            let count = rows[index].notification.payload.count
            items.append(
                HTTP2WorkItem(
                    row: TokenRow(token: rows[index].notification.token, line: ServiceMarks.line(rows[index].seq)),
                    payload: buffer.getSlice(at: start, length: count),
                    headers: HTTP2RowHeaders(rows[index].notification.headers)
                )
            )
            start += count
        }
        return items
    }

    /// Writes the marks to the disk once a second until the service stops (for a machine's crash: a killed process
    /// loses no mark anyway), on `BlockingWork`'s threads. Done in the writer's
    /// cycle, the `msync` of the ring and the two `fsync`s held that cycle, and every request waiting on it, for
    /// milliseconds once a second: the 99th percentile of the 202s at 1,000 requests a second.
    private func marksLoop(_ marks: ServiceMarks) async {
        while !self.state.withLockedValue({ $0.stopping }) {
            try? await Task.sleep(for: .seconds(1))
            await BlockingWork.run { marks.sync() }
        }
    }

    /// Renews the leases of the rows this worker holds, every `every`, until the service stops (a store shared by
    /// workers: a row whose lease runs out is taken over by another). The rows the renewal no longer finds held are
    /// lost (`LeaseBook.renewed`): those not yet written are taken out of the sending. A renewal that fails is logged
    /// and tried again after a second; the lease outlasts two renewals, and rows whose lease is about to end without
    /// one are not written (`LeaseBook.withheld`).
    private func leaseLoop(every: Duration) async {
        while !self.state.withLockedValue({ $0.stopping }) {
            let failing = self.state.withLockedValue { $0.storeProblem != nil }
            await self.pauseLeases(for: failing ? min(every, .seconds(1)) : every)
            guard !self.state.withLockedValue({ $0.stopping }) else { break }
            let ticket = self.leases?.withLockedValue { $0.renewalStarted() }
            let renewal: LeaseRenewal
            do {
                renewal = try await self.store.renewLeases(ticket?.seqs ?? [], now: self.configuration.now())
            } catch {
                self.logger.error("the rows' leases cannot be renewed", metadata: ["cause": "\(error.message)"])
                self.storeFailed(error.message)
                continue
            }
            self.storeAnswered()
            guard let leases = self.leases, let ticket else { continue }
            let loss = leases.withLockedValue { $0.renewed(ticket, held: renewal.held, until: renewal.until) }
            guard !loss.isEmpty else { continue }
            self.metrics.leasesLostUnwritten.increment(by: loss.unwritten.count)
            self.metrics.leasesLostWritten.increment(by: loss.written.count)
            self.logger.warning(
                "rows taken over by another worker: the unwritten ones are taken out of the sending",
                metadata: ["unwritten": "\(loss.unwritten.count)", "written": "\(loss.written.count)"]
            )
        }
    }

    /// Waits `duration`, or less when `renewSoon` is called meanwhile.
    private func pauseLeases(for duration: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            self.leasePause.withLockedValue { $0 = continuation }
            let nanoseconds =
                duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
            self.timers.schedule(in: .nanoseconds(nanoseconds)) { self.renewSoon() }
            // `shutdown` sets `stopping` before it ends the pause: one of the two sees the other.
            if self.state.withLockedValue({ $0.stopping }) { self.renewSoon() }
        }
    }

    /// Ends the lease loop's pause: a commit was fenced, so the renewal that finds the other lost rows comes now.
    private func renewSoon() {
        let pause = self.leasePause.withLockedValue { pause in
            defer { pause = nil }
            return pause
        }
        pause?.resume()
    }

    /// While the store fails, asks it for a small write every second, until one succeeds (the service is then ready
    /// and claims again) or the service stops: a store that failed with nothing left to write is found back.
    private func healthLoop() async {
        while !self.state.withLockedValue({ $0.stopping }) {
            try? await Task.sleep(for: .seconds(1))
            guard self.state.withLockedValue({ $0.storeProblem != nil && !$0.stopping }) else { continue }
            do {
                try await self.store.checkWritable()
                self.storeAnswered()
            } catch {
                self.storeFailed(error.message)
            }
        }
    }

    /// How often an idle worker of a shared store claims anyway: the bound on a wake-up `watchQueue` missed (a
    /// connection lost) and on rows whose lease ran out, which no notification announces.
    public static let claimPoll = Duration.seconds(2)

    /// Claims every `claimPoll` while the feed wants rows and the store answers, until the service stops.
    private func pollLoop() async {
        while !self.state.withLockedValue({ $0.stopping }) {
            try? await Task.sleep(for: Self.claimPoll)
            self.queueSignalled()
        }
    }

    /// Rows may be queued (another worker's notification, or the poll): a claim, when the feed wants rows and the
    /// store answers.
    private func queueSignalled() {
        let wanted = self.state.withLockedValue { state -> Bool in
            guard state.storeProblem == nil, !state.stopping, let feed = state.feed else { return false }
            return feed.wanted > 0
        }
        if wanted { self.kick(claim: true) }
    }

    // MARK: Sender

    /// The HTTP/2 job, started again (after a bounded, growing pause) whenever it stops, until the service stops.
    private func senderLoop() async {
        var delay = self.configuration.restartDelay
        while !self.state.withLockedValue({ $0.stopping }) {
            let feed = ServiceFeed(target: self.configuration.feedRows) { [weak self] in self?.kick(claim: true) }
            let stop = JobStop(grace: self.configuration.shutdownGrace)
            self.jobStop.withLockedValue { $0 = stop }
            self.state.withLockedValue { $0.feed = feed }
            self.kick(claim: true)
            let onUncertain = self.configuration.onUncertain
            let now = self.configuration.now
            let result: HTTP2ServeResult
            do {
                var job = self.configuration.job
                job.journal = self.marks?.journal
                result = try await HTTP2Job.serve(
                    configuration: job,
                    feed: feed,
                    answers: { [weak self] answers in
                        self?.answered(AnswerOutcomes.updates(answers, onUncertain: onUncertain, at: now()))
                    },
                    answerLatency: nil,
                    gate: self.gate,
                    stop: stop
                )
            } catch {
                self.logger.error("the sending job cannot start", metadata: ["cause": "\(error)"])
                self.state.withLockedValue { $0.senderProblem = "\(error)" }
                self.requeue(feed.close())
                self.state.withLockedValue { $0.feed = nil }
                try? await Task.sleep(for: self.configuration.maximumRestartDelay)
                continue
            }
            self.requeue(feed.close())
            let answered = result.report.confirmed + result.report.rejected.values.reduce(0, +) > 0
            self.state.withLockedValue { state in
                state.feed = nil
                state.senderProblem = result.stopped.map { "the sending job stopped: \($0.message)" }
            }
            if let stopped = result.stopped, !self.state.withLockedValue({ $0.stopping }) {
                self.logger.error("the sending job stopped", metadata: ["cause": "\(stopped.message)"])
            }
            if self.state.withLockedValue({ $0.stopping }) { break }
            delay = answered ? self.configuration.restartDelay : min(delay * 2, self.configuration.maximumRestartDelay)
            try? await Task.sleep(for: delay)
        }
        self.state.withLockedValue { $0.senderEnded = true }
        self.kick()
    }

    /// Rows the feed held when the job stopped: never sent, back to the queue.
    private func requeue(_ items: [HTTP2WorkItem]) {
        guard !items.isEmpty else { return }
        let at = self.configuration.now()
        self.answered(items.map { OutcomeUpdate(seq: $0.row.line, state: .queued, at: at) })
    }

    /// The sending job's answers (on its event loops), each naming its row by its line: to the next cycle, by
    /// the row's sequence number.
    private func answered(_ updates: [OutcomeUpdate]) {
        guard !updates.isEmpty else { return }
        // Rows another worker took over: their outcomes are not this worker's to record (the store would refuse
        // them); they leave this worker's rows here.
        let lost: Set<Int> =
            self.leases?.withLockedValue { book in
                Set(updates.compactMap { book.gaveBack(line: $0.seq) != nil ? $0.seq : nil })
            } ?? []
        let wake = self.state.withLockedValue { state in
            for var update in updates {
                guard let entry = state.inFlight[update.seq] else { continue }
                if lost.contains(update.seq) {
                    state.inFlight[update.seq] = nil
                    state.depth -= 1
                    continue
                }
                update.seq = entry.seq
                // APNs echoes the request's apns-id, which is the notification's id unless its caller chose one: the
                // store keeps only an apns-id that says more than the request did.
                if update.apnsID == entry.id { update.apnsID = nil }
                state.outcomes.append(update)
            }
            return Self.takeWake(&state)
        }
        wake?.resume()
    }

    // MARK: Answers' bodies

    static func uuid(milliseconds: Int64) -> String {
        var generator = SystemRandomNumberGenerator()
        return Self.uuid(milliseconds: milliseconds, using: &generator)
    }

    /// A version-7 UUID (RFC 9562): the Unix time in milliseconds in its first 48 bits, then 74 bits of
    /// `generator`'s, written straight into its string (one allocation: an id is made for every notification a
    /// request carries). Time first, so that the store's index of ids grows at its end: with version-4 ids every
    /// cycle's rows landed on random pages of the index, and each commit wrote most of the index again (a cycle of
    /// 1,600 rows wrote over a thousand pages to the log).
    public static func uuid(milliseconds: Int64, using generator: inout some RandomNumberGenerator) -> String {
        let time = UInt64(clamping: max(0, milliseconds)) & 0xFFFF_FFFF_FFFF
        let first: UInt64 = generator.next()
        let second: UInt64 = generator.next()
        var bytes = ((time << 16 | first & 0xFFFF).bigEndian, second)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x70
            raw[8] = raw[8] & 0x3F | 0x80
            return String(unsafeUninitializedCapacity: 36) { out in
                let base = out.baseAddress!
                // 8-4-4-4-12 hex digits: bytes 0..<4, 4..<6, 6..<8, 8..<10, 10..<16.
                var at = 0
                for (start, end) in [(0, 4), (4, 6), (6, 8), (8, 10), (10, 16)] {
                    if start > 0 {
                        base[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    Hex.write(UnsafeRawBufferPointer(rebasing: raw[start..<end]), to: base + at)
                    at += 2 * (end - start)
                }
                return at
            }
        }
    }

    /// The 202's body: `{"batch":…,"accepted":…,"refused":…,"notifications":[…]}`, compact. Written as bytes, not
    /// as a tree of values: it names every notification of the request (a tree of three members for each cost a
    /// thirtieth of the service's time); a refusal's text is written as a value, for its escapes.
    static func acceptedBody(batch: String, _ items: NotificationBatch) -> [UInt8] {
        let accepted = items.accepted.count
        var out: [UInt8] = []
        out.reserveCapacity(80 + items.items.count * 72)
        out += #"{"batch":"#.utf8
        out += JSONValue.string(batch).compactBytes
        out += #","accepted":"#.utf8
        out += String(accepted).utf8
        out += #","refused":"#.utf8
        out += String(items.items.count - accepted).utf8
        out += #","notifications":["#.utf8
        for (index, item) in items.items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            switch item {
            case .accepted(let place):
                out += #"{"index":"#.utf8
                out += String(index).utf8
                out += #","id":""#.utf8
                // An id is the service's UUID: hex digits and dashes, nothing to escape.
                out += items.accepted[place].id.utf8
                out += #"","state":"queued"}"#.utf8
            case .refused(let error):
                out +=
                    JSONValue.object([
                        JSONMember("index", .int(index)),
                        JSONMember(
                            "error",
                            .object([
                                JSONMember("field", .string(error.field)), JSONMember("reason", .string(error.reason)),
                            ])
                        ),
                    ]).compactBytes
            }
        }
        out += "]}".utf8
        return out
    }
}

/// Two `SplitMix64` streams seeded from the system's generator (128 bits of seed), drawn in turn: cheap ids.
struct SplitMix128: RandomNumberGenerator {
    private var first: SplitMix64
    private var second: SplitMix64
    private var turn = false

    init(seed: SystemRandomNumberGenerator) {
        var system = seed
        self.first = SplitMix64(seed: system.next())
        self.second = SplitMix64(seed: system.next())
    }

    mutating func next() -> UInt64 {
        self.turn.toggle()
        return self.turn ? self.first.next() : self.second.next()
    }
}

/// The sending job's questions, before every row it writes and at every flush of its connections, answered by the
/// service's `LeaseBook` at the time of the question.
final class LeaseGate: HTTP2WriteGate {
    private let leases: NIOLockedValueBox<LeaseBook>
    private let now: @Sendable () -> Int64
    private let metrics: ServiceMetrics

    init(leases: NIOLockedValueBox<LeaseBook>, now: @escaping @Sendable () -> Int64, metrics: ServiceMetrics) {
        self.leases = leases
        self.now = now
        self.metrics = metrics
    }

    func withheld(_ lines: [Int]) -> Set<Int> {
        let now = self.now()
        let (withheld, lapsed) = self.leases.withLockedValue { book -> (Set<Int>, Int) in
            let before = book.lapsed
            let withheld = book.withheld(lines, now: now)
            return (withheld, book.lapsed - before)
        }
        if lapsed > 0 { self.metrics.lapsed.increment(by: lapsed) }
        return withheld
    }

    /// Once a row written here may be another worker's, nothing more leaves: what the connections hold is dropped
    /// and they are closed (`WriteFenceHandler`); their rows' streams end unanswered, uncertain, and the job connects
    /// again once no such row is left.
    func forbidsEveryWrite() -> Bool {
        let now = self.now()
        return self.leases.withLockedValue { $0.mayHaveLostAWrittenRow(now: now) }
    }
}
