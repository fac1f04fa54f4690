import APNSWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import SalvoRows
import SalvoSend
import SalvoService

/// The service's campaigns: each one a `send --journal` job (`BulkSend.prepare` and `run` on a `CampaignJob`'s
/// request), run, paused (its job stopped through a `JobStop`: the journal keeps what was settled), resumed (the
/// same request run again on the same journal) and cancelled as `CampaignMachine` decides; their records in the
/// store, their files in the store's folder. The HTTP layer only calls it.
public actor CampaignRunner {
    let store: any CampaignStore
    /// The store's partitions, when it keeps them (a fleet's store): then each campaign's audience is cut into
    /// partitions that any worker claims (`CampaignRunner+Fleet`); nil: each campaign is one job on this node.
    let partitionStore: (any CampaignPartitionStore)?
    let fleet: CampaignFleet
    /// The campaigns whose audience is in the store's partitions.
    var partitioned: Set<String> = []
    /// How many times this worker wrote each campaign's record: a read of the records begun before a write is not
    /// followed for that campaign (it would undo the write).
    var recordWrites: [String: Int] = [:]
    private var follower: Task<Void, Never>?
    let job: CampaignJob
    let now: @Sendable () -> Int64
    /// Returns once `now` has reached a time (milliseconds since 1970), or at once when its task is cancelled: the
    /// waits of local-time campaigns between their groups.
    let waitUntil: @Sendable (Int64) async -> Void
    let logger: Logger
    /// A stored template's text by its name (the service's templates), nil when there is none.
    private let template: @Sendable (String) -> [UInt8]?
    var machine = CampaignMachine()
    var records: [String: CampaignRecord] = [:]
    var settings: [String: CampaignSettings] = [:]
    /// Each campaign's last finished run's report (read from its folder when not yet known here).
    var reports: [String: JobReport] = [:]
    var jobs: [String: (task: Task<Void, Never>, stop: JobStop)] = [:]
    /// The running jobs' latest progress, written from the jobs' threads.
    let progress = NIOLockedValueBox<[String: JobProgress]>([:])
    /// The rows each campaign's jobs settled per second over the last hour (the console's charts), written from the
    /// jobs' threads with their progress.
    private let samples = NIOLockedValueBox<[String: RateRing]>([:])
    private var scheduler: Task<Void, Never>?
    /// Where the campaigns' events for webhooks go; nil: no webhook takes them.
    private let webhooks: CampaignWebhooks?
    /// How long rows in flight may take to settle when a job is paused, cancelled or stopped.
    public static let stopGrace: Duration = .seconds(2)

    public init(
        store: any CampaignStore,
        job: CampaignJob,
        template: @escaping @Sendable (String) -> [UInt8]?,
        now: @escaping @Sendable () -> Int64,
        waitUntil: (@Sendable (Int64) async -> Void)? = nil,
        logger: Logger,
        webhooks: CampaignWebhooks? = nil,
        fleet: CampaignFleet = CampaignFleet()
    ) {
        self.webhooks = webhooks.flatMap { $0.routes.isEmpty ? nil : $0 }
        self.store = store
        self.partitionStore = store as? any CampaignPartitionStore
        self.fleet = fleet
        self.job = job
        self.template = template
        self.now = now
        self.waitUntil = waitUntil ?? { time in await Self.sleep(until: time, now: now) }
        self.logger = logger
    }

    /// Sleeps until `now()` reaches `time`, a minute at most at a time (the wall clock may be set meanwhile), or
    /// until the task is cancelled.
    static func sleep(until time: Int64, now: @Sendable () -> Int64) async {
        while !Task.isCancelled {
            let left = time - now()
            guard left > 0 else { return }
            try? await Task.sleep(for: .milliseconds(min(left, 60_000)))
        }
    }

    /// Reads the campaigns from the store, removes what a stopped service left half-made, resumes the campaigns that
    /// were running and starts watching the scheduled ones' times.
    public func start() async throws(StoreFailure) {
        let records = try await self.store.campaigns()
        let folder = self.job.folder
        let known = Set(records.map(\.id))
        try await BlockingWork.run { () throws(StoreFailure) in try folder.prepare(known: known) }
        for record in records {
            guard let state = CampaignState(rawValue: record.state),
                let settings = try? CampaignSettings.read(record.settings, upload: Self.isUpload(record.settings))
            else {
                self.logger.error("a campaign's record cannot be read", metadata: ["campaign": "\(record.id)"])
                continue
            }
            self.records[record.id] = record
            self.settings[record.id] = settings
            if let partitions = self.partitionStore, try await partitions.partitioned(campaign: record.id) != nil {
                self.partitioned.insert(record.id)
            }
            // A run that ended before the service stopped may have left its rejects underived.
            await self.deriveEvents(record.id)
            let actions = self.machine.restore(id: record.id, state: state, sendAt: record.sendAt)
            if !actions.isEmpty {
                self.logger.notice("resuming a campaign that was running", metadata: ["campaign": "\(record.id)"])
            }
            await self.carryOut(actions)
        }
        self.scheduler = Task { [weak self] in await self?.watchSchedule() }
        if self.partitionStore != nil {
            self.follower = Task { [weak self] in await self?.followFleet() }
        }
    }

    /// Stops every running job (their campaigns stay `running`, for the next start to resume) and waits for them.
    public func shutdown() async {
        self.scheduler?.cancel()
        self.follower?.cancel()
        await self.carryOut(self.machine.shutdown())
        for (_, job) in self.jobs { await job.task.value }
    }

    // MARK: Operations

    /// `POST /v1/campaigns`: checks the audience (`upload`: the body, written whole to `campaigns/incoming/`) and
    /// the template against it, makes the campaign's folder, records it, and starts it when its time has come.
    /// Nothing of a refused campaign stays.
    public func create(
        settings: CampaignSettings,
        upload: CampaignUpload?,
        keyID: String
    ) async -> Result<CampaignStatus, ServiceProblem> {
        let id = Self.newID()
        let folder = self.job.folder
        let uploadPath = upload?.path
        func discard() async {
            if let uploadPath { await BlockingWork.run { _ = unlink(uploadPath) } }
            await BlockingWork.run { folder.remove(id) }
        }
        let templateText = settings.template.flatMap { self.template($0) }
        if let name = settings.template, templateText == nil {
            await discard()
            return .failure(ServiceProblem(.invalidCampaign, detail: "no template named \(name)", field: "template"))
        }
        if case .postgres = settings.audience, self.job.query == nil {
            await discard()
            return .failure(CampaignJob.noDatabase)
        }
        let job = self.job
        do throws(ServiceProblem) {
            // The folder first (the template is read from it), then the audience opened and its first rows read
            // by the very code the runs use.
            try await BlockingWork.run { () throws(ServiceProblem) in
                do throws(StoreFailure) {
                    try folder.create(id, upload: uploadPath, template: templateText)
                } catch {
                    throw ServiceProblem(
                        .unavailable,
                        detail: "the store cannot write: \(error.message)",
                        retryAfter: 5
                    )
                }
            }
            let check = try await BlockingWork.run { () throws(ServiceProblem) in
                try job.request(id: id, settings: settings, journal: false)
            }
            if case .postgres(let query) = settings.audience, let database = job.query {
                // Described, not run: its rows are copied at the first run.
                let columns = try await database.check(query: query, column: settings.column)
                try Self.checkColumns(columns, of: check, settings: settings)
            } else {
                try await Self.checkAudience(check, settings: settings)
            }
            if settings.deliverAtLocal != nil, settings.audience.isFile, let audience = check.files.first {
                try await BlockingWork.run { () throws(ServiceProblem) in
                    try LocalTimePlan.checkHeader(audience: audience, zoneColumn: settings.zoneColumn)
                }
            }
            if let partitions = self.partitionStore, settings.deliverAtLocal == nil, let audience = check.files.first {
                try await self.cut(id: id, audience: audience, template: templateText, into: partitions)
            }
        } catch {
            await discard()
            return .failure(error)
        }
        let now = self.now()
        let sendAt = settings.sendAt ?? now
        let (state, startedNow, actions) = self.machine.create(id: id, sendAt: sendAt, now: now)
        let record = CampaignRecord(
            id: id,
            state: state.rawValue,
            settings: settings.json,
            createdBy: keyID,
            createdAt: now,
            sendAt: sendAt,
            startedAt: startedNow ? now : nil
        )
        do {
            if let webhooks = self.webhooks, webhooks.routes.takes(.campaign) {
                let event = CampaignEvents.state(campaign: id, state: state, message: nil, at: now)
                try await self.store.putCampaign(record, events: [event], routes: webhooks.routes)
                webhooks.wake()
            } else {
                try await self.store.putCampaign(record)
            }
        } catch {
            self.machine.forget(id: id)
            await self.discardPartitions(id)
            await discard()
            return .failure(
                ServiceProblem(.unavailable, detail: "the store cannot write: \(error.message)", retryAfter: 5)
            )
        }
        self.records[id] = record
        self.settings[id] = settings
        if self.partitionStore != nil, settings.deliverAtLocal == nil { self.partitioned.insert(id) }
        self.logger.info(
            "campaign created",
            metadata: ["campaign": "\(id)", "state": "\(state.rawValue)", "created_by": "\(keyID)"]
        )
        await self.carryOut(actions)
        var status = await self.status(id)!
        status.startedNow = startedNow
        return .success(status)
    }

    /// A file in `campaigns/incoming/` for an uploaded audience, written as the body arrives.
    public func beginUpload() async throws(StoreFailure) -> CampaignUpload {
        try await CampaignUpload.begin(in: self.job.folder, id: Self.newID())
    }

    /// How large an upload may be, and the room the store's disk must keep.
    public nonisolated var uploadRoom: CampaignUploadRoom { self.job.uploadRoom }

    /// The bytes free on the campaigns' file system (`.max` when it cannot be read: the writes then say).
    public nonisolated func freeBytes() async -> Int {
        let folder = self.job.folder
        return await BlockingWork.run { folder.freeBytes() } ?? .max
    }

    public func list() async -> [CampaignStatus] {
        var list: [CampaignStatus] = []
        for record in self.records.values.sorted(by: { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }) {
            if let status = await self.status(record.id) { list.append(status) }
        }
        return list
    }

    public func status(_ id: String) async -> CampaignStatus? {
        guard let record = self.records[id], let settings = self.settings[id],
            let state = self.machine.campaigns[id]?.state
        else { return nil }
        var status = CampaignStatus(record: record, state: state, settings: settings)
        if self.partitioned.contains(id) {
            status.report = await self.fleetReport(id)
        } else if self.reports[id] == nil {
            let path = self.job.folder.report(id)
            if let bytes = await BlockingWork.run({ CampaignFolder.contents(path) }),
                let report = try? JSONDecoder().decode(JobReport.self, from: Data(bytes))
            {
                self.reports[id] = report
            }
        }
        if !self.partitioned.contains(id) { status.report = self.reports[id] }
        status.progress = self.progress.withLockedValue { $0[id] }
        if settings.deliverAtLocal != nil {
            let folder = self.job.folder
            status.local = await BlockingWork.run { () -> CampaignStatus.Local? in
                guard let plan = LocalTimePlan.load(folder, id) else { return nil }
                let sent = Set(plan.groups.indices.filter { LocalTimePlan.isSent(folder, id, plan.groups[$0].instant) })
                return CampaignStatus.Local(plan: plan, sent: sent)
            }
        }
        return status
    }

    /// `POST …/pause`, `…/resume`, `…/cancel`: the machine's decision carried out. A pause or cancel of a running
    /// campaign answers once its job has stopped.
    public func apply(
        _ operation: CampaignMachine.Operation,
        to id: String
    ) async -> Result<
        CampaignStatus, ServiceProblem
    > {
        guard self.records[id] != nil else {
            return .failure(ServiceProblem(.notFound, detail: "no campaign \(id)"))
        }
        let actions: [CampaignMachine.Action]
        do throws(CampaignMachine.Refusal) {
            switch operation {
            case .pause: actions = try self.machine.pause(id: id)
            case .resume: actions = try self.machine.resume(id: id, now: self.now())
            case .cancel: actions = try self.machine.cancel(id: id)
            }
        } catch {
            return .failure(
                ServiceProblem(
                    .campaignState,
                    detail: "\(error.reason) (it is \(error.state.rawValue))",
                    field: "state"
                )
            )
        }
        let stopping = actions.contains { if case .stop = $0 { true } else { false } }
        let running = self.jobs[id]?.task
        if operation == .cancel, stopping, self.partitioned.contains(id) {
            // On a fleet the cancel is recorded at once, before this worker closes the partitions: another worker
            // that finds them all closed follows the cancel rather than recording the campaign finished over it.
            await self.record(id, .cancelled, message: nil)
        }
        await self.carryOut(actions)
        if stopping, let running { await running.value }
        return .success(await self.status(id)!)
    }

    /// The rows the campaign's jobs settled per second over the last hour; nil when none ran in that time.
    public nonisolated func rates(_ id: String) -> RateRing? {
        self.samples.withLockedValue { $0[id] }
    }

    /// Which file of a campaign's last run: `report.json`, `rejects.csv` or `unsettled.csv`.
    public enum ResultFile: Sendable {
        case report, rejects, unsettled
        /// A local-time campaign's rows that used the fallback (`LocalTimePlan`).
        case fallback
    }

    /// A result file as its last run wrote it, in `send`'s format.
    public func file(_ file: ResultFile, of id: String) async -> Result<[UInt8], ServiceProblem> {
        guard self.records[id] != nil else {
            return .failure(ServiceProblem(.notFound, detail: "no campaign \(id)"))
        }
        if self.partitioned.contains(id), file != .fallback {
            return await self.fleetFile(file, of: id)
        }
        let folder = self.job.folder
        let path =
            switch file {
            case .report: folder.report(id)
            case .rejects: folder.rejects(id)
            case .unsettled: folder.unsettled(id)
            case .fallback: LocalTimePlan.fallbackPath(folder, id)
            }
        guard let bytes = await BlockingWork.run({ CampaignFolder.contents(path) }) else {
            return .failure(
                ServiceProblem(.notFound, detail: "campaign \(id) has no such file yet: a run writes it when it ends")
            )
        }
        return .success(bytes)
    }

    // MARK: Carrying out

    func carryOut(_ actions: [CampaignMachine.Action]) async {
        for action in actions {
            switch action {
            case .start(let id):
                self.run(id, closing: false)
            case .closeOut(let id):
                self.run(id, closing: true)
            case .stop(let id, let reason):
                let text =
                    switch reason {
                    case .pause: "paused through the API"
                    case .cancel: "cancelled through the API"
                    case .shutdown: "the service is shutting down"
                    case .elsewhere: "another worker of the fleet changed the campaign"
                    }
                self.jobs[id]?.stop.request(reason: text)
            case .record(let id, let state, let message):
                await self.record(id, state, message: message)
            }
        }
    }

    private func record(_ id: String, _ state: CampaignState, message: String?) async {
        guard var record = self.records[id] else { return }
        self.recordWrites[id, default: 0] += 1
        let now = self.now()
        record.state = state.rawValue
        record.message = message
        if state == .running && record.startedAt == nil { record.startedAt = now }
        if state.isFinal || state == .failed { record.endedAt = now }
        self.records[id] = record
        do {
            if let webhooks = self.webhooks, webhooks.routes.takes(.campaign) {
                let event = CampaignEvents.state(campaign: id, state: state, message: message, at: now)
                try await self.store.putCampaign(record, events: [event], routes: webhooks.routes)
                webhooks.wake()
            } else {
                try await self.store.putCampaign(record)
            }
        } catch {
            self.logger.error(
                "a campaign's state cannot be recorded",
                metadata: ["campaign": "\(id)", "state": "\(state.rawValue)", "error": "\(error.message)"]
            )
        }
        self.logger.info("campaign \(state.rawValue)", metadata: ["campaign": "\(id)"])
    }

    /// Runs the campaign's job in a task of its own; `closing`: stopped before its first row (a cancel's report).
    private func run(_ id: String, closing: Bool) {
        guard let settings = self.settings[id] else { return }
        if self.records[id]?.startedAt == nil, !closing { self.records[id]?.startedAt = self.now() }
        let stop = JobStop(grace: Self.stopGrace)
        if closing { stop.request(reason: "cancelled through the API") }
        let job = self.job
        let progress = self.progress
        let samples = self.samples
        let now = self.now
        let logger = self.logger
        let local = settings.deliverAtLocal != nil
        let partitioned = self.partitioned.contains(id)
        let task = Task {
            let end =
                partitioned
                ? await self.runFleet(id: id, settings: settings, stop: stop, closing: closing)
                : local
                    ? await self.runLocal(id: id, settings: settings, stop: stop, closing: closing)
                    : await Self.runJob(
                        id: id,
                        settings: settings,
                        job: job,
                        stop: stop,
                        progress: Self.recorder(id, progress: progress, samples: samples, now: now)
                    )
            if case .failed(let reason) = end.end {
                logger.error("a campaign's job failed", metadata: ["campaign": "\(id)", "reason": "\(reason)"])
            }
            await self.ended(id, end.end, report: end.report)
        }
        self.jobs[id] = (task, stop)
    }

    private func ended(_ id: String, _ end: CampaignMachine.JobEnd, report: JobReport?) async {
        self.jobs[id] = nil
        self.progress.withLockedValue { _ = $0.removeValue(forKey: id) }
        // Rings nothing was added to for their whole span show nothing: dropped.
        let stale = RateRing.second(self.now()) - Int64(RateRing().capacity)
        self.samples.withLockedValue { rings in rings = rings.filter { ($0.value.latest ?? stale) > stale } }
        if let report { self.reports[id] = report }
        await self.deriveEvents(id)
        await self.carryOut(self.machine.jobEnded(id: id, end))
    }

    /// What a run of campaign `id` does with each progress snapshot: keeps it (the live counts) and adds the rows it
    /// settled since the last one to the campaign's rate ring, in the second they were seen.
    static func recorder(
        _ id: String,
        progress: NIOLockedValueBox<[String: JobProgress]>,
        samples: NIOLockedValueBox<[String: RateRing]>,
        now: @escaping @Sendable () -> Int64
    ) -> @Sendable (JobProgress) -> Void {
        { snapshot in
            let at = now()
            let before = progress.withLockedValue { $0.updateValue(snapshot, forKey: id)?.settled ?? 0 }
            samples.withLockedValue { $0[id, default: RateRing()].add(snapshot.settled - before, at: at) }
        }
    }

    /// `recorder` for this runner's campaign `id`.
    nonisolated func recorder(_ id: String) -> @Sendable (JobProgress) -> Void {
        Self.recorder(id, progress: self.progress, samples: self.samples, now: self.now)
    }

    struct Ended: Sendable {
        var end: CampaignMachine.JobEnd
        var report: JobReport?
    }

    /// One run: `BulkSend.prepare` and `run`, as `send --journal` runs them (of a local-time campaign's `group`).
    static func runJob(
        id: String,
        settings: CampaignSettings,
        job: CampaignJob,
        stop: JobStop,
        progress: @escaping @Sendable (JobProgress) -> Void,
        group: Int64? = nil
    ) async -> Ended {
        do {
            if group == nil { try await job.prepareAudience(id: id, settings: settings) }
        } catch {
            return Ended(end: .failed(error.detail), report: nil)
        }
        return await Self.run(stop: stop, progress: progress) { () throws(ServiceProblem) in
            try job.request(id: id, settings: settings, group: group)
        }
    }

    /// A job's run, as `send --journal` runs it: its request made (on `BlockingWork`: a template is read, a path
    /// resolved), `BulkSend.prepare` and `run`, and how it ended.
    static func run(
        stop: JobStop,
        progress: @escaping @Sendable (JobProgress) -> Void,
        request makeRequest: @escaping @Sendable () throws(ServiceProblem) -> SendRequest
    ) async -> Ended {
        do {
            let request = try await BlockingWork.run(makeRequest)
            stop.begin()
            let send = try await BulkSend.prepare(request, stop: stop)
            let result = try await send.run(progress: progress, stop: stop)
            if let stopped = result.stopped ?? result.report.stopped {
                return Ended(end: .stopped(stopped), report: result.report)
            }
            if let error = result.error { return Ended(end: .failed(error.message), report: result.report) }
            return Ended(end: .finished, report: result.report)
        } catch let error as ServiceProblem {
            return Ended(end: .failed(error.detail), report: nil)
        } catch let error as JobError {
            return Ended(end: .failed(error.message), report: nil)
        } catch {
            return Ended(end: .failed("\(error)"), report: nil)
        }
    }

    /// Refuses an audience the runs could not send: opened and its first rows read by `BulkSend.prepare` (no journal,
    /// no output), after the template's fields are looked for in its header.
    private static func checkAudience(_ request: SendRequest, settings: CampaignSettings) async throws(ServiceProblem) {
        let field: String =
            switch settings.audience {
            case .upload: "audience"
            case .file: "audience.file"
            case .postgres: "audience.postgres"
            }
        do throws(JobError) {
            _ = try await BulkSend.prepare(request)
        } catch {
            // A template's field missing from the header is the template's fault as much as the audience's: named so.
            let templateField = settings.template != nil && error.message.contains("names no column of the header")
            throw ServiceProblem(
                .invalidCampaign,
                detail: error.message,
                field: templateField ? "template" : field
            )
        }
    }

    /// Refuses a query whose columns lack what the campaign's template or local time names (the checks
    /// `checkAudience` makes on a file's header, made here on the columns the server described).
    private static func checkColumns(
        _ columns: [String],
        of request: SendRequest,
        settings: CampaignSettings
    ) throws(ServiceProblem) {
        if let templates = request.payloads {
            do throws(InputError) {
                _ = try RowPayloads(templates: templates, limit: (settings.pushType ?? .alert).payloadLimit).columns(
                    in: "the query",
                    header: columns
                )
            } catch {
                throw ServiceProblem(.invalidCampaign, detail: error.description, field: "template")
            }
        }
        if settings.deliverAtLocal != nil {
            try LocalTimePlan.checkZoneColumn(columns, zoneColumn: settings.zoneColumn, audience: "the query's columns")
        }
    }

    // MARK: Webhooks

    /// Puts the events of the campaign's rejects file (its gone tokens and refusals, as its last run wrote them) in
    /// the outbox, when the file changed since they were last derived: each event's id is made from its row, so a
    /// derivation done again makes no repeat.
    private func deriveEvents(_ id: String) async {
        guard let webhooks = self.webhooks, webhooks.routes.takes(.gone) || webhooks.routes.takes(.refused) else {
            return
        }
        let path = self.job.folder.rejects(id)
        let source = "campaign:\(id):rejects"
        let now = self.now()
        do throws(StoreFailure) {
            guard let signature = await BlockingWork.run({ CampaignFolder.signature(path) }),
                try await webhooks.outbox.derivedSignature(of: source) != signature,
                let bytes = await BlockingWork.run({ CampaignFolder.contents(path) })
            else { return }
            let events = CampaignEvents.rejects(campaign: id, csv: String(decoding: bytes, as: UTF8.self), at: now)
            let added = try await webhooks.outbox.enqueue(
                events,
                routes: webhooks.routes,
                source: (source, signature)
            )
            if added > 0 { webhooks.wake() }
        } catch {
            self.logger.error(
                "a campaign's webhook events cannot be written",
                metadata: ["campaign": "\(id)", "error": "\(error.message)"]
            )
        }
    }

    // MARK: Schedule

    /// Starts each scheduled campaign when its time comes: looks at most once a second, or at the next one's time.
    private func watchSchedule() async {
        while !Task.isCancelled {
            await self.carryOut(self.machine.tick(now: self.now()))
            let now = self.now()
            let wait = min(1000, max(10, (self.machine.nextDue ?? now + 1000) - now))
            try? await Task.sleep(for: .milliseconds(wait))
        }
    }

    // MARK: Pieces

    static func isUpload(_ settings: [UInt8]) -> Bool {
        guard let value = try? JSONValue.parse(settings).value else { return true }
        return value["audience"] == nil
    }

    static func newID() -> String {
        UUID().uuidString.lowercased()
    }
}
