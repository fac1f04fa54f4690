import Foundation
import Logging
import NIOConcurrencyHelpers
import SalvoRows
import SalvoSend
import SalvoService

extension CampaignRunner {
    /// A local-time campaign's run: its rows grouped by instant (`LocalTimePlan`, once), then each group not yet sent,
    /// in order, once `LocalTimeSchedule.next` says its instant has come, as a `send --journal` job of its own (a
    /// group whose job ended with every row settled is marked sent and never run again). A stop ends the wait or the
    /// group's job; then, unless the service is stopping, every group that never ran gets a run stopped before its
    /// first row, so that the campaign's report counts its rows not sent. After each group and at the end, the
    /// campaign's report, rejects and unsettled files are the groups' merged.
    ///
    /// - Parameter closing: a cancelled campaign's closing run: nothing is sent.
    func runLocal(id: String, settings: CampaignSettings, stop: JobStop, closing: Bool) async -> Ended {
        guard let time = settings.deliverAtLocal, let start = self.records[id]?.sendAt else {
            return Ended(end: .failed("the campaign has no local time"), report: nil)
        }
        let job = self.job
        let folder = job.folder
        let relay = LocalStopRelay()
        stop.install { _ in relay.request(reason: stop.reason ?? "stopped") }
        defer { stop.detach() }

        let plan: LocalTimePlan
        let audience: String
        do {
            try await job.prepareAudience(id: id, settings: settings)
            audience = try await BlockingWork.run { () throws(ServiceProblem) in
                try job.audience(id: id, settings: settings)
            }
            if let made = await BlockingWork.run({ LocalTimePlan.load(folder, id) }) {
                plan = made
            } else {
                let schedule = LocalTimeSchedule(time: time, fallback: settings.localFallback, start: start)
                let zoneColumn = settings.zoneColumn
                let made = try await BlockingWork.run { () throws(JobError) in
                    try LocalTimePlan.make(
                        audience: audience,
                        zoneColumn: zoneColumn,
                        schedule: schedule,
                        folder: folder,
                        id: id,
                        stopped: { !closing && stop.reason != nil }
                    )
                }
                guard let made else { return Ended(end: .stopped(stop.reason ?? "stopped"), report: nil) }
                plan = made
                self.logger.info(
                    "local-time campaign grouped",
                    metadata: [
                        "campaign": "\(id)", "groups": "\(made.groups.count)", "rows": "\(made.inputRows)",
                        "fallback_rows": "\(made.fallbackRows)", "skipped_rows": "\(made.skippedRows)",
                    ]
                )
            }
        } catch let error as ServiceProblem {
            return Ended(end: .failed(error.detail), report: nil)
        } catch let error as JobError {
            return Ended(end: .failed(error.message), report: nil)
        } catch {
            return Ended(end: .failed("\(error)"), report: nil)
        }

        let groups = plan.scheduleGroups
        var sent = await BlockingWork.run {
            Set(groups.indices.filter { LocalTimePlan.isSent(folder, id, groups[$0].instant) })
        }
        // While groups run, the campaign's counts are the sent groups' report plus the running group's progress.
        self.reports[id] = await self.mergeLocalFiles(id, plan: plan, audience: audience, sent: sent, write: false).sent
        var end: CampaignMachine.JobEnd?
        running: while !closing && stop.reason == nil {
            switch LocalTimeSchedule.next(groups: groups, sent: sent, now: self.now()) {
            case .finished:
                break running
            case .wait(let until):
                let waitUntil = self.waitUntil
                await relay.wait { await waitUntil(until) }
            case .send(let index):
                let instant = groups[index].instant
                let groupStop = JobStop(grace: Self.stopGrace)
                relay.current(groupStop)
                let ended = await Self.runJob(
                    id: id,
                    settings: settings,
                    job: job,
                    stop: groupStop,
                    progress: self.recorder(id),
                    group: instant
                )
                relay.current(nil)
                self.progress.withLockedValue { _ = $0.removeValue(forKey: id) }
                guard case .finished = ended.end else {
                    end = ended.end
                    break running
                }
                do {
                    try await BlockingWork.run { () throws(JobError) in
                        try LocalTimePlan.markSent(folder, id, instant)
                    }
                } catch {
                    end = .failed(error.message)
                    break running
                }
                sent.insert(index)
                let merged = await self.mergeLocalFiles(id, plan: plan, audience: audience, sent: sent)
                if let report = merged.sent { self.reports[id] = report }
            }
        }
        let finished = sent.count == groups.count
        if !finished, closing || (stop.reason != nil && self.machine.campaigns[id]?.stopping != .shutdown) {
            for group in groups {
                let hasReport = await BlockingWork.run {
                    access(LocalTimePlan.groupFolder(folder, id, group.instant) + "/report.json", F_OK) == 0
                }
                guard !hasReport else { continue }
                let closingStop = JobStop(grace: Self.stopGrace)
                closingStop.request(reason: stop.reason ?? "cancelled through the API")
                _ = await Self.runJob(
                    id: id,
                    settings: settings,
                    job: job,
                    stop: closingStop,
                    progress: self.recorder(id),
                    group: group.instant
                )
                self.progress.withLockedValue { _ = $0.removeValue(forKey: id) }
            }
        }
        let report = await self.mergeLocalFiles(id, plan: plan, audience: audience, sent: sent).all
        if finished { return Ended(end: .finished, report: report) }
        return Ended(end: end ?? .stopped(stop.reason ?? "stopped"), report: report)
    }

    /// Writes the campaign's report, rejects, unsettled and unregistered files from its groups' (those that have
    /// run; `write` false: none written) and returns the report, and that of the groups `sent` alone.
    private func mergeLocalFiles(
        _ id: String,
        plan: LocalTimePlan,
        audience: String,
        sent: Set<Int>,
        write: Bool = true
    ) async -> (all: JobReport?, sent: JobReport?) {
        let folder = self.job.folder
        let outcome = await BlockingWork.run { () -> Result<(JobReport?, JobReport?), JobError> in
            var reports: [JobReport] = []
            var sentReports: [JobReport] = []
            var ran: [Int64] = []
            for group in plan.groups {
                let path = LocalTimePlan.groupFolder(folder, id, group.instant) + "/report.json"
                guard let bytes = CampaignFolder.contents(path),
                    let report = try? JSONDecoder().decode(JobReport.self, from: Data(bytes))
                else { continue }
                reports.append(report)
                ran.append(group.instant)
                if let index = plan.groups.firstIndex(of: group), sent.contains(index) { sentReports.append(report) }
            }
            let sentMerged = LocalTimePlan.mergeReports(sentReports)
            guard let merged = LocalTimePlan.mergeReports(reports), write else {
                return .success((LocalTimePlan.mergeReports(reports), sentMerged))
            }
            do throws(JobError) {
                for (name, column, path) in [
                    ("rejects.csv", 0, folder.rejects(id)), ("unsettled.csv", 1, folder.unsettled(id)),
                    ("unregistered.csv", -1, folder.unregistered(id)),
                ] {
                    try LocalTimePlan.mergeCSV(
                        name,
                        fileColumn: column,
                        groups: ran,
                        folder: folder,
                        id: id,
                        audience: audience,
                        into: path
                    )
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data: Data
                do {
                    data = try encoder.encode(merged)
                } catch {
                    throw JobError(.output, "the report cannot be written: \(error)")
                }
                let writer = try AtomicFileWriter(path: folder.report(id))
                try writer.write(Array(data))
                try writer.commit()
            } catch {
                return .failure(error)
            }
            return .success((merged, sentMerged))
        }
        switch outcome {
        case .success(let (all, sent)):
            return (all, sent)
        case .failure(let error):
            self.logger.error(
                "a local-time campaign's files cannot be written",
                metadata: ["campaign": "\(id)", "error": "\(error.message)"]
            )
            return (nil, nil)
        }
    }
}

/// A local-time campaign's stop, passed on: to the group's job that runs (each group's job has its stop), and to the
/// wait for the next group, which it ends.
final class LocalStopRelay: Sendable {
    private struct State {
        var reason: String?
        var current: JobStop?
        var waiting: Task<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    /// The campaign's stop was requested (again: the group's job stops at once).
    func request(reason: String) {
        let (current, waiting) = self.state.withLockedValue { state in
            if state.reason == nil { state.reason = reason }
            return (state.current, state.waiting)
        }
        current?.request(reason: reason)
        waiting?.cancel()
    }

    /// The group's job that runs now (nil: none); stopped at once when a stop came before.
    func current(_ stop: JobStop?) {
        let reason = self.state.withLockedValue { state in
            state.current = stop
            return state.reason
        }
        if let reason { stop?.request(reason: reason) }
    }

    /// Runs `body` (a wait) in a task of its own, cancelled by a stop.
    func wait(_ body: @escaping @Sendable () async -> Void) async {
        let task = Task { await body() }
        let stopped = self.state.withLockedValue { state in
            state.waiting = task
            return state.reason != nil
        }
        if stopped { task.cancel() }
        await task.value
        self.state.withLockedValue { $0.waiting = nil }
    }
}
