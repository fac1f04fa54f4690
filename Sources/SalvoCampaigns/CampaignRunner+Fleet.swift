import Foundation
import Logging
import NIOConcurrencyHelpers
import SalvoRows
import SalvoSend
import SalvoService

#if canImport(Glibc)
import Glibc
#endif

/// How a fleet runs its campaigns (a store that keeps partitions, `CampaignPartitionStore`).
public struct CampaignFleet: Sendable {
    /// Rows per partition.
    public var partitionRows = 10_000
    /// How long a claimed partition is its worker's without a checkpoint (milliseconds).
    public var lease: Int64 = 10_000
    /// How often a holder checkpoints its partition and renews its lease (milliseconds).
    public var checkpointEvery: Int64 = 300
    /// How often a worker reads the campaigns' records for what other workers changed, and how long it waits at
    /// most before claiming again when others hold every partition left (milliseconds).
    public var poll: Int64 = 500

    public init() {}

    /// A holder whose checkpoints fail stops its job when its lease has less than this left: a third of it.
    public var margin: Int64 { self.lease / 3 }
}

extension CampaignRunner {
    // MARK: Creation

    /// Cuts a new campaign's audience into partitions in the store (with its template's text), before its record.
    func cut(
        id: String,
        audience: String,
        template: [UInt8]?,
        into store: any CampaignPartitionStore
    ) async throws(ServiceProblem) {
        let rows = self.fleet.partitionRows
        // The cut reads the file on a thread of its own and hands each batch over, waiting for it to be put in the
        // store: one batch at a time in memory.
        let (batches, continuation) = AsyncStream<[CampaignPartition]>.makeStream()
        let consumed = DispatchSemaphore(value: 0)
        let reading = Task {
            await BlockingWork.run { () -> String? in
                defer { continuation.finish() }
                do {
                    _ = try PartitionSpool.cut(audience: audience, rowsPerPartition: rows) { batch in
                        continuation.yield(batch)
                        consumed.wait()
                    }
                    return nil
                } catch let error as JobError {
                    return error.message
                } catch {
                    return "\(error)"
                }
            }
        }
        var failure: String?
        var first = true
        for await batch in batches {
            defer { consumed.signal() }
            guard failure == nil else { continue }
            do {
                try await store.putPartitions(campaign: id, template: first ? template : nil, partitions: batch)
                first = false
            } catch {
                failure = "the store cannot write: \(error.message)"
            }
        }
        if let reason = await reading.value {
            await self.discardPartitions(id)
            throw ServiceProblem(.invalidCampaign, detail: reason, field: "audience")
        }
        if let failure {
            await self.discardPartitions(id)
            throw ServiceProblem(.unavailable, detail: failure, retryAfter: 5)
        }
    }

    func discardPartitions(_ id: String) async {
        guard let store = self.partitionStore else { return }
        do {
            try await store.deletePartitions(campaign: id)
        } catch {
            self.logger.error(
                "a refused campaign's partitions cannot be removed",
                metadata: ["campaign": "\(id)", "error": "\(error.message)"]
            )
        }
    }

    // MARK: Results

    /// The campaign's report: its partitions' reports added up (nil before any partition ran).
    func fleetReport(_ id: String) async -> JobReport? {
        guard let store = self.partitionStore, let reports = try? await store.partitionReports(campaign: id) else {
            return self.reports[id]
        }
        let report = PartitionSpool.report(reports: reports)
        if let report { self.reports[id] = report }
        return report ?? self.reports[id]
    }

    func fleetFile(_ file: ResultFile, of id: String) async -> Result<[UInt8], ServiceProblem> {
        guard let store = self.partitionStore, let settings = self.settings[id] else {
            return .failure(ServiceProblem(.notFound, detail: "no campaign \(id)"))
        }
        let results: [PartitionResult]
        do {
            results = try await store.partitionResults(campaign: id)
        } catch {
            return .failure(
                ServiceProblem(.unavailable, detail: "the store cannot be read: \(error.message)", retryAfter: 5)
            )
        }
        let audience = (try? self.job.audience(id: id, settings: settings)) ?? self.job.folder.audience(id)
        let bytes: [UInt8]?
        switch file {
        case .report:
            bytes = PartitionSpool.report(results).flatMap { report in
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                return (try? encoder.encode(report)).map { Array($0) }
            }
        case .rejects: bytes = PartitionSpool.csv(results, \.rejects, fileColumn: 0, audience: audience)
        case .unsettled: bytes = PartitionSpool.csv(results, \.unsettled, fileColumn: 1, audience: audience)
        case .fallback: bytes = nil
        }
        guard let bytes else {
            return .failure(
                ServiceProblem(.notFound, detail: "campaign \(id) has no such file yet: a run writes it when it ends")
            )
        }
        return .success(bytes)
    }

    // MARK: Following the fleet

    /// Reads the campaigns' records every `poll` and follows what other workers recorded (`CampaignMachine.follow`):
    /// a campaign made elsewhere is taken up, a running one is helped, a pause, cancel or failure elsewhere stops this
    /// worker's part of it.
    func followFleet() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(self.fleet.poll))
            let writes = self.recordWrites
            guard !Task.isCancelled, let records = try? await self.store.campaigns() else { continue }
            for record in records where self.recordWrites[record.id] == writes[record.id] {
                await self.follow(record)
            }
        }
    }

    private func follow(_ record: CampaignRecord) async {
        guard let state = CampaignState(rawValue: record.state) else { return }
        let id = record.id
        if self.records[id] == nil {
            guard let store = self.partitionStore, let set = try? await store.partitioned(campaign: id),
                let settings = try? CampaignSettings.read(record.settings, upload: Self.isUpload(record.settings))
            else { return }
            if let made = await self.ensureFolder(id, template: set.template) {
                self.logger.error(
                    "a fleet's campaign cannot be taken up",
                    metadata: ["campaign": "\(id)", "error": "\(made)"]
                )
                return
            }
            self.partitioned.insert(id)
            self.settings[id] = settings
            self.records[id] = record
        }
        guard self.partitioned.contains(id) else { return }
        if self.jobs[id] == nil { self.records[id] = record }
        await self.carryOut(self.machine.follow(id: id, state: state, sendAt: record.sendAt))
    }

    /// Makes the campaign's folder on this worker, with its template's text, when it has none (a campaign made by
    /// another worker); the reason when it cannot.
    func ensureFolder(_ id: String, template: [UInt8]?) async -> String? {
        let folder = self.job.folder
        return await BlockingWork.run { () -> String? in
            guard access(folder.folder(id), F_OK) != 0 else { return nil }
            do throws(StoreFailure) {
                try folder.create(id, upload: nil, template: template)
                return nil
            } catch {
                return error.message
            }
        }
    }

    // MARK: Running

    /// This worker's part of a fleet's campaign: partitions claimed one after another and each run as a
    /// `send --journal` job, until none is left (the campaign is finished), the job is stopped, or one fails. While
    /// others hold the rest, it waits (a lease's end at the latest: a dead worker's partition is then taken over).
    /// A cancel (here or elsewhere), or a cancelled campaign's closing run, closes every partition it can claim with a
    /// run stopped before its first row, so that the campaign's report counts the rows not sent.
    func runFleet(id: String, settings: CampaignSettings, stop: JobStop, closing: Bool) async -> Ended {
        guard let store = self.partitionStore else {
            return Ended(end: .failed("the store keeps no partitions"), report: nil)
        }
        do {
            let set = try await store.partitioned(campaign: id)
            if let failure = await self.ensureFolder(id, template: set?.template) {
                return Ended(end: .failed(failure), report: nil)
            }
        } catch {
            return Ended(end: .failed("the store cannot be read: \(error.message)"), report: nil)
        }
        let relay = LocalStopRelay()
        stop.install { _ in relay.request(reason: stop.reason ?? "stopped") }
        defer { stop.detach() }
        var end: CampaignMachine.JobEnd?
        running: while !closing && stop.reason == nil {
            let result: PartitionClaimResult
            // The lease of a claim runs from here at the latest.
            let claimedAt = self.now()
            do {
                result = try await store.claimPartition(
                    campaign: id,
                    rate: settings.rate,
                    now: claimedAt,
                    lease: self.fleet.lease
                )
            } catch {
                self.logger.warning(
                    "a partition cannot be claimed",
                    metadata: ["campaign": "\(id)", "error": "\(error.message)"]
                )
                await self.idle(relay, until: self.now() + self.fleet.poll)
                continue
            }
            switch result {
            case .nothing(.done):
                // Every partition is done; a cancel (or a pause or failure) recorded elsewhere may have closed them:
                // followed, as its record says, rather than recorded finished over it.
                if let record = try? await self.store.campaign(id: id),
                    let state = CampaignState(rawValue: record.state), state != .running, state != .finished
                {
                    await self.carryOut(self.machine.follow(id: id, state: state, sendAt: record.sendAt))
                    break running
                }
                end = .finished
                break running
            case .nothing(.waiting(let until)):
                let now = self.now()
                await self.idle(relay, until: min(until.map { $0 + 1 } ?? now + self.fleet.poll, now + self.fleet.poll))
            case .claimed(let claim):
                let ended = await self.runPartition(
                    claim,
                    claimedAt: claimedAt,
                    settings: settings,
                    relay: relay,
                    closing: false
                )
                if case .failed = ended {
                    end = ended
                    break running
                }
                if case .stopped = ended, stop.reason != nil { break running }
            }
        }
        let cancelled =
            closing || self.machine.campaigns[id]?.stopping == .cancel
            || self.machine.campaigns[id]?.followed == .cancelled
        if cancelled { await self.closePartitions(id: id, settings: settings) }
        let report = await self.fleetReport(id)
        if let end { return Ended(end: end, report: report) }
        return Ended(end: .stopped(stop.reason ?? "stopped"), report: report)
    }

    /// Waits until `time`, or until the campaign's stop.
    private func idle(_ relay: LocalStopRelay, until time: Int64) async {
        let waitUntil = self.waitUntil
        await relay.wait { await waitUntil(time) }
    }

    /// Claims every partition it can and closes it (a run stopped before its first row, released done); the
    /// partitions other workers hold are theirs to close.
    private func closePartitions(id: String, settings: CampaignSettings) async {
        guard let store = self.partitionStore else { return }
        while true {
            let claimedAt = self.now()
            guard
                case .claimed(let claim)? = try? await store.claimPartition(
                    campaign: id,
                    rate: nil,
                    now: claimedAt,
                    lease: self.fleet.lease
                )
            else { return }
            _ = await self.runPartition(
                claim,
                claimedAt: claimedAt,
                settings: settings,
                relay: LocalStopRelay(),
                closing: true
            )
        }
    }

    /// Runs one claimed partition: its file written, its journal made again from its last checkpoint when it ran
    /// before (here or elsewhere: a run stopped before its first row makes the journal, the checkpoint's states go
    /// into it, those a dead holder may have written since marked written: `CampaignPartitions.takeover`), then its
    /// job, checkpointed every `checkpointEvery` under the claim's fence (a refused checkpoint, or none committed
    /// while the lease runs out, stops it at once), asking before each row it writes whether the lease, as last
    /// renewed, still lets it (`PartitionWriteGate`), and released with its files: done when every row settled (or
    /// closing), open again otherwise.
    private func runPartition(
        _ claim: PartitionClaim,
        claimedAt: Int64,
        settings: CampaignSettings,
        relay: LocalStopRelay,
        closing: Bool
    ) async -> CampaignMachine.JobEnd {
        guard let store = self.partitionStore else { return .failed("the store keeps no partitions") }
        let id = claim.campaign
        let folder = self.job.folder
        let journal = PartitionSpool.journal(folder, id, claim.part)
        let job = self.job
        let logger = self.logger
        let share = claim.share
        func closedRun() async -> CampaignMachine.JobEnd {
            let closed = JobStop(grace: Self.stopGrace)
            closed.request(reason: "cancelled through the API")
            return await Self.runPartitionJob(
                id: id,
                settings: settings,
                job: job,
                part: claim.part,
                share: share,
                stop: closed,
                progress: { _ in }
            ).end
        }
        do {
            try await BlockingWork.run { () throws(JobError) in try PartitionSpool.write(claim, folder: folder) }
        } catch {
            return .failed(error.message)
        }
        if claim.checkpoint != nil || claim.takeover {
            if case .failed(let reason) = await closedRun() { return .failed(reason) }
            let checkpoint = claim.checkpoint
            let header = PartitionSpool.headerLines(claim.audience)
            let taken: CampaignPartitions.Takeover?
            do {
                taken = try await BlockingWork.run { () throws(JobError) -> CampaignPartitions.Takeover? in
                    // The states' length: the checkpoint's, or, when the holder never checkpointed, the journal's own
                    // (its line count as the job scans the file), read back from the journal just made.
                    guard
                        let lines = checkpoint?.states.count
                            ?? PartitionSpool.checkpoint(journal: journal, at: 0)?.states.count
                    else {
                        throw JobError(
                            .output,
                            "\(JobJournal.statePath(journal)): the partition's journal was not made"
                        )
                    }
                    // A holder that never checkpointed may have written any row: every one is marked written, to be
                    // counted uncertain.
                    var taken: CampaignPartitions.Takeover?
                    if claim.takeover, checkpoint == nil || claim.previousLeaseUntil != nil {
                        taken = CampaignPartitions.takeover(
                            states: checkpoint?.states,
                            lines: lines,
                            headerLines: header,
                            share: claim.previousShare,
                            checkpointAt: checkpoint?.at,
                            leaseUntil: claim.previousLeaseUntil ?? 0,
                            burst: claim.previousShare ?? 0
                        )
                    }
                    try PartitionSpool.restore(
                        journal: journal,
                        states: taken?.states ?? checkpoint?.states ?? [],
                        rejectsLog: checkpoint?.rejectsLog ?? []
                    )
                    return taken
                }
            } catch {
                return .failed(error.message)
            }
            if let taken {
                logger.notice(
                    "a partition taken over from a worker whose lease ran out",
                    metadata: [
                        "campaign": "\(id)", "partition": "\(claim.part)", "fence": "\(claim.fence)",
                        "uncertain": "\(taken.uncertain)", "written_since_checkpoint": "\(taken.writtenSince)",
                    ]
                )
            }
        }
        let partStop = JobStop(grace: Self.stopGrace)
        if closing { partStop.request(reason: "cancelled through the API") }
        relay.current(partStop)
        let lost = LostClaim()
        let gate = PartitionWriteGate(claimedAt: claimedAt, fleet: self.fleet, now: self.now, stop: partStop)
        let watching = Task {
            await self.checkpointLoop(claim, journal: journal, gate: gate, stop: partStop, lost: lost)
        }
        let ended = await Self.runPartitionJob(
            id: id,
            settings: settings,
            job: job,
            part: claim.part,
            share: share,
            gate: gate,
            stop: partStop,
            progress: self.recorder(id)
        )
        relay.current(nil)
        watching.cancel()
        await watching.value
        self.progress.withLockedValue { _ = $0.removeValue(forKey: id) }
        let now = self.now()
        let final = await BlockingWork.run { () -> (PartitionCheckpoint?, PartitionFiles) in
            (PartitionSpool.checkpoint(journal: journal, at: now), PartitionSpool.files(folder, id, claim.part))
        }
        guard !lost.value, let checkpoint = final.0 else { return .stopped("the partition was taken over") }
        let done: Bool
        switch ended.end {
        case .finished: done = true
        default: done = closing
        }
        do {
            let released = try await store.releasePartition(claim, checkpoint: checkpoint, files: final.1, done: done)
            if !released { return .stopped("the partition was taken over") }
        } catch {
            // Its lease runs out and another worker takes it over from its last checkpoint.
            logger.error(
                "a partition cannot be released",
                metadata: ["campaign": "\(id)", "partition": "\(claim.part)", "error": "\(error.message)"]
            )
        }
        return ended.end
    }

    static func runPartitionJob(
        id: String,
        settings: CampaignSettings,
        job: CampaignJob,
        part: Int,
        share: Int?,
        gate: PartitionWriteGate? = nil,
        stop: JobStop,
        progress: @escaping @Sendable (JobProgress) -> Void
    ) async -> Ended {
        await Self.run(stop: stop, progress: progress) { () throws(ServiceProblem) in
            try job.request(id: id, settings: settings, partition: part, share: share, gate: gate)
        }
    }

    /// Checkpoints the running partition every `checkpointEvery` until cancelled, each committed one renewing the
    /// lease the write gate reads: a checkpoint refused (the partition taken over) or none committed while the lease
    /// runs out (`CampaignPartitions.mustStop`, the gate closed) stops its job at once.
    private func checkpointLoop(
        _ claim: PartitionClaim,
        journal: String,
        gate: PartitionWriteGate,
        stop: JobStop,
        lost: LostClaim
    ) async {
        guard let store = self.partitionStore else { return }
        let fleet = self.fleet
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(fleet.checkpointEvery))
            guard !Task.isCancelled else { return }
            let now = self.now()
            guard let checkpoint = await BlockingWork.run({ PartitionSpool.checkpoint(journal: journal, at: now) })
            else {
                continue
            }
            do {
                if try await store.checkpointPartition(claim, checkpoint: checkpoint, now: now, lease: fleet.lease) {
                    gate.renewed(at: now)
                    continue
                }
                lost.set()
                self.logger.warning(
                    "a partition was taken over: its job stops",
                    metadata: ["campaign": "\(claim.campaign)", "partition": "\(claim.part)"]
                )
            } catch {
                guard gate.isClosed(at: self.now()) else { continue }
                lost.set()
                self.logger.error(
                    "a partition's lease cannot be renewed: its job stops",
                    metadata: [
                        "campaign": "\(claim.campaign)", "partition": "\(claim.part)", "error": "\(error.message)",
                    ]
                )
            }
            stop.request(reason: "the partition's lease was lost")
            stop.request(reason: "the partition's lease was lost")
            return
        }
    }
}

/// Whether a holder lost its claim while its job ran.
final class LostClaim: Sendable {
    private let box = NIOLockedValueBox(false)
    var value: Bool { self.box.withLockedValue { $0 } }
    func set() { self.box.withLockedValue { $0 = true } }
}
