import APNSWire
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SalvoHTTP2
import SalvoRows

/// One broadcast per row of a channel CSV (`POST /4/broadcasts/apps/<bundle id>`), over one HTTP/2 connection with a
/// window of requests in flight, a rate cap, 429/500/503 sent again with backoff (a bounded number of times), and a
/// journal that makes a rerun after a kill broadcast no update twice.
///
/// The journal (`--journal DIR`) is the send's `RowJournal`: one state byte per input line, marked `written` before
/// a request leaves and settled (confirmed, rejected with its reason) by its answer. A rerun sends only the rows
/// still `none`; a row left `written` (sent, the answer lost to a kill or a dropped connection) is never sent again
/// (at most once: a Live Activity update seen twice is worse than one missed) and is listed in the unsettled file.
/// A row answered only with refusals that mean "not taken" (429, a refused stream) goes back to `none`.
public struct BroadcastJob: Sendable {
    public struct Options: Sendable {
        public var inputPath: String
        /// The column holding channel ids (a header name or 1-based number).
        public var channelColumn = "channel_id"
        /// The column with each channel's storage policy, used when present (an inventory has it).
        public var policyColumn = "policy"
        public var templateFile: String
        public var bundleID: String
        /// The environment the broadcasts go to: an input with an `environment` column (an inventory) whose rows
        /// name another is refused, as one with a `bundle_id` column naming another app.
        public var environment: BroadcastEnvironment?
        public var expiration: Int64 = 0
        public var priority = 10
        public var partition: Partition?
        public var journalDirectory: String?
        /// Requests in flight at once.
        public var window = 64
        /// Broadcasts per second, at most.
        public var rate: Int?
        public var retry = HTTP2RetryPolicy.default
        public var reportPath: String?
        public var rejectsPath: String?
        public var unsettledPath: String?

        public init(inputPath: String, templateFile: String, bundleID: String) {
            self.inputPath = inputPath
            self.templateFile = templateFile
            self.bundleID = bundleID
        }
    }

    public var options: Options
    public var stop: JobStop?
    /// About twice a second, and once at the end.
    public var progress: (@Sendable (JobProgress) -> Void)?
    /// Where the job reads the time and waits: the retries' backoff, the rate cap's waits, the pause before a
    /// reconnect, and the report's seconds (a test's `ManualJobClock`).
    public var clock: any JobClock = SystemJobClock()

    public init(options: Options) {
        self.options = options
    }

    /// One row's end in this run.
    enum RowEnd: Sendable {
        case confirmed
        case rejected(status: Int, reason: String)
        /// Sent, no answer that says: never sent again.
        case uncertain(String)
        /// Never taken (429 or refused streams only, attempts used up; or the job stopped first).
        case notSent(String)
        /// Refused for the app or the credentials, not for this row (`ChannelFailure.isAppWide`): not taken, and
        /// every other row would be refused the same way, so the job stops.
        case appRefused(ChannelFailure)
    }

    public struct Result: Sendable {
        public var report = JobReport()
        /// Rows refused before sending or by APNs, with the reason.
        public var rejects: [(line: Int, channel: String, status: Int, reason: String)] = []
        /// Rows not settled (uncertain or not sent), with their state.
        public var unsettled: [(line: Int, channel: String, state: String)] = []
        public var outputFailures: [String] = []
    }

    /// Reads the input and the template and checks them (job-wide problems throw before anything is sent).
    func prepare() throws -> (CSVTable, BroadcastRequestBuilder, channel: Int, policy: Int?) {
        if let problem = ChannelManagement.problem(bundleID: self.options.bundleID) {
            throw JobError(.configuration, "--bundle-id: \(problem)")
        }
        let table = try CSVTable.read(self.options.inputPath)
        guard let channel = table.column(self.options.channelColumn) else {
            throw InputError(
                file: self.options.inputPath,
                line: 1,
                message:
                    "no column \(self.options.channelColumn) in the header (\(table.header.joined(separator: ",")))"
            )
        }
        let policy = table.column(self.options.policyColumn)
        try self.checkIdentity(table, channel: channel)
        if self.options.expiration != 0 && policy == nil {
            throw JobError(
                .configuration,
                "--expiration \(self.options.expiration) needs to know each channel's storage policy (a no-storage "
                    + "channel refuses a nonzero expiration), and \(self.options.inputPath) has no "
                    + "\(self.options.policyColumn) column: use the channel inventory, or --expiration 0"
            )
        }
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: self.options.templateFile)))
        } catch {
            throw InputError(file: self.options.templateFile, line: nil, message: "cannot read the file: \(error)")
        }
        let template = try PayloadTemplate(json: bytes, file: self.options.templateFile)
        let builder: BroadcastRequestBuilder
        do throws(BroadcastRowError) {
            builder = try BroadcastRequestBuilder(
                bundleID: self.options.bundleID,
                template: template,
                header: table.header,
                expiration: self.options.expiration,
                priority: self.options.priority
            )
        } catch {
            throw JobError(.configuration, "\(self.options.templateFile): \(error.detail)")
        }
        return (table, builder, channel, policy)
    }

    /// Refuses an input whose rows are another app's or environment's channels (an inventory's `bundle_id` and
    /// `environment` columns), naming the first such row and both sides.
    func checkIdentity(_ table: CSVTable, channel: Int) throws(JobError) {
        let path = self.options.inputPath
        let checks: [(column: Int?, want: String?, option: String)] = [
            (table.column("bundle_id"), self.options.bundleID, "--bundle-id"),
            (table.column("environment"), self.options.environment?.rawValue, "--environment"),
        ]
        for check in checks {
            guard let column = check.column, let want = check.want else { continue }
            for (line, fields) in table.rows {
                guard column < fields.count, !fields[column].isEmpty, fields[column] != want else { continue }
                let id = channel < fields.count ? fields[channel] : ""
                throw JobError(
                    .configuration,
                    "\(path) line \(line): channel \(id) is \(table.header[column]) \(fields[column]), and this "
                        + "broadcast is for \(want) (\(check.option)): use the inventory of its own channels"
                )
            }
        }
    }

    /// Runs the job; `connect` opens (and after a lost connection reopens) the connection to the push host.
    public func run(connect: @escaping @Sendable () async throws -> HTTP2Exchanger) async throws -> Result {
        let start = self.now()
        let (table, builder, channelColumn, policyColumn) = try self.prepare()
        let lineCount = (table.rows.last?.line ?? 1) + 1
        let opened = try self.openJournal(lineCount: lineCount)
        // The lock is held until the run returns (its report and the journal's last sync written).
        defer { withExtendedLifetime(opened?.lock) {} }
        let journal = opened?.rows
        var result = Result()
        var report = JobReport()
        report.mode = "broadcast"
        report.partition = self.options.partition
        report.onUncertain = OnUncertain.report.rawValue

        // The rows of this partition, checked before anything is sent.
        var work: [(line: Int, channel: String, request: HTTP2Request)] = []
        var settledBefore = 0
        var inheritedUncertain = 0
        let now = Int64(Date().timeIntervalSince1970)
        // The first line of each channel id: a channel listed twice is broadcast once (the later rows refused).
        var firstLine: [String: Int] = [:]
        for (line, fields) in table.rows {
            let channel = channelColumn < fields.count ? fields[channelColumn] : ""
            if let partition = self.options.partition, !partition.contains(channel: channel) { continue }
            report.inputRows += 1
            if !channel.isEmpty, let first = firstLine[channel] {
                report.invalidInput += 1
                let reason = "DuplicateChannel (not sent): the channel is also on line \(first), broadcast once"
                result.rejects.append((line, channel, 0, reason))
                continue
            }
            firstLine[channel] = line
            let policyName = policyColumn.flatMap { $0 < fields.count ? fields[$0] : nil } ?? ""
            let policy = MessageStoragePolicy(name: policyName)
            if !policyName.isEmpty && policy == nil {
                report.invalidInput += 1
                let reason = "BadPolicy (not sent): policy '\(policyName)' is not none or most-recent"
                result.rejects.append((line, channel, 0, reason))
                continue
            }
            if let journal {
                let state = journal.state(file: 0, line: line)
                if state.isSettled {
                    settledBefore += 1
                    Self.count(state, into: &report)
                    continue
                }
                if state == .written {
                    inheritedUncertain += 1
                    report.uncertain += 1
                    result.unsettled.append((line, channel, "uncertain (sent by an earlier run, no answer)"))
                    continue
                }
            }
            switch builder.request(fields: fields, channelID: channel, policy: policy, now: now) {
            case .success(let request):
                work.append((line, channel, request))
            case .failure(let problem):
                report.invalidInput += 1
                result.rejects.append((line, channel, 0, "\(problem.reason) (not sent): \(problem.detail)"))
                journal?.reject(file: 0, line: line, status: 0, reason: problem.reason, token: channel)
            }
        }
        report.validRows = work.count + settledBefore + inheritedUncertain
        if journal != nil {
            report.resumed = JobResume(run: 0, settledBefore: settledBefore, inheritedUncertain: inheritedUncertain)
        }
        let counts = NIOLockedValueBox(report)
        let ends = try await self.send(work, journal: journal, connect: connect, counts: counts, start: start)
        report = counts.withLockedValue { $0 }
        for (index, end) in ends.enumerated() {
            let row = work[index]
            switch end {
            case nil:
                result.unsettled.append((row.line, row.channel, "not sent (the job stopped first)"))
            case .confirmed?:
                break
            case .rejected(let status, let reason)?:
                result.rejects.append((row.line, row.channel, status, reason))
            case .uncertain(let why)?:
                result.unsettled.append((row.line, row.channel, "uncertain: \(why)"))
            case .notSent(let why)?:
                result.unsettled.append((row.line, row.channel, "not sent: \(why)"))
            case .appRefused(let failure)?:
                result.unsettled.append((row.line, row.channel, "not sent: APNs refused the app with \(failure)"))
            }
        }
        report.notSent =
            ends.filter {
                switch $0 {
                case nil, .notSent?, .appRefused?: true
                default: false
                }
            }.count
        report.seconds = Double((self.now() - start).nanoseconds) / 1e9
        report.notificationsPerSecond = report.seconds > 0 ? Double(report.confirmed) / report.seconds : 0
        report.stopped = self.stop?.reason ?? report.stopped
        journal?.sync()
        result.report = report
        result.rejects.sort { $0.line < $1.line }
        result.unsettled.sort { $0.line < $1.line }
        self.progress?(JobProgress(validRows: report.validRows, seconds: report.seconds, report: report))
        self.writeOutputs(&result)
        return result
    }

    /// The time on the job's clock.
    private func now() -> NIODeadline { .uptimeNanoseconds(self.clock.now) }

    private static func count(_ state: RowState, into report: inout JobReport) {
        switch state {
        case .confirmed, .presumed: report.confirmed += 1
        case .rejected: report.rejected["(earlier run)", default: 0] += 1
        case .expired: report.expired += 1
        default: break
        }
    }

    /// Sends `work` with at most `window` in flight; each row's end, nil for a row never sent.
    private func send(
        _ work: [(line: Int, channel: String, request: HTTP2Request)],
        journal: RowJournal?,
        connect: @escaping @Sendable () async throws -> HTTP2Exchanger,
        counts: NIOLockedValueBox<JobReport>,
        start: NIODeadline
    ) async throws -> [RowEnd?] {
        var ends = [RowEnd?](repeating: nil, count: work.count)
        guard !work.isEmpty else { return ends }
        let link = Link(connect: connect, clock: self.clock)
        var limiter = self.options.rate.map { HTTP2RateLimiter(perSecond: $0, now: self.now()) }
        var lastProgress = self.now()
        var lastSync = self.now()
        let validRows = counts.withLockedValue { $0.validRows }
        let inFlight = NIOLockedValueBox(0)
        // The first refusal of the app itself: nothing more is sent once it came (what is in flight is answered).
        var appRefusal: ChannelFailure?
        try await withThrowingTaskGroup(of: (Int, RowEnd).self) { group in
            var next = 0
            var running = 0
            while next < work.count || running > 0 {
                while next < work.count && running < self.options.window && self.stop?.reason == nil
                    && appRefusal == nil
                {
                    if var bucket = limiter {
                        let now = self.now()
                        if bucket.take(upTo: 1, now: now) == 0 {
                            let wait = bucket.nextAvailable(now: now) - now
                            limiter = bucket
                            if running > 0 { break }
                            await self.clock.sleep(nanoseconds: UInt64(max(0, wait.nanoseconds)))
                            continue
                        }
                        limiter = bucket
                    }
                    let index = next
                    let row = work[index]
                    next += 1
                    running += 1
                    journal?.mark(file: 0, line: row.line, .written)
                    inFlight.withLockedValue { $0 += 1 }
                    group.addTask { (index, await self.broadcast(row.request, link: link)) }
                }
                if (self.stop?.reason != nil || appRefusal != nil) && running == 0 { break }
                guard running > 0 else {
                    // The rate limiter asked for a wait with nothing in flight: the loop above slept.
                    continue
                }
                guard let (index, end) = try await group.next() else { break }
                running -= 1
                inFlight.withLockedValue { $0 -= 1 }
                ends[index] = end
                let row = work[index]
                counts.withLockedValue { report in
                    switch end {
                    case .confirmed:
                        report.confirmed += 1
                        journal?.mark(file: 0, line: row.line, .confirmed)
                    case .rejected(let status, let reason):
                        report.rejected[reason, default: 0] += 1
                        journal?.reject(file: 0, line: row.line, status: status, reason: reason, token: row.channel)
                    case .uncertain:
                        report.uncertain += 1
                    case .notSent:
                        journal?.mark(file: 0, line: row.line, .none)
                    case .appRefused(let failure):
                        // Not this row's refusal: left to be sent by a rerun once the cause is fixed.
                        journal?.mark(file: 0, line: row.line, .none)
                        if appRefusal == nil {
                            appRefusal = failure
                            report.stopped =
                                "APNs refused the app with \(failure) (line \(row.line)): every other broadcast "
                                + "would be refused the same way, so none was sent after it; the rows not sent are "
                                + "left for a rerun once the cause is fixed"
                        }
                    }
                }
                let now = self.now()
                if now - lastSync > .milliseconds(200) {
                    journal?.sync()
                    lastSync = now
                }
                if now - lastProgress > .milliseconds(500), let progress = self.progress {
                    let report = counts.withLockedValue { $0 }
                    let seconds = Double((now - start).nanoseconds) / 1e9
                    progress(
                        JobProgress(
                            validRows: validRows,
                            seconds: seconds,
                            report: report,
                            inFlight: inFlight.withLockedValue { $0 },
                            connections: 1
                        )
                    )
                    lastProgress = now
                }
            }
        }
        await link.close()
        if let failure = await link.failure {
            counts.withLockedValue { $0.stopped = "the broadcast endpoint cannot be reached: \(failure)" }
        }
        return ends
    }

    /// One row: sent, and sent again after 429/500/503 or a refused stream (the policy's backoff and attempts).
    private func broadcast(_ request: HTTP2Request, link: Link) async -> RowEnd {
        var attempts = 0
        var onlyRefusals = true
        var last = ""
        while true {
            attempts += 1
            guard let exchanger = await link.current() else {
                let why = await link.failure ?? "no connection"
                return onlyRefusals ? .notSent(why) : .uncertain(why)
            }
            var retryAfter: Int64?
            switch await exchanger.exchange(request) {
            case .answered(let response):
                if response.status == 200 { return .confirmed }
                let failure = response.failure(unless: 200) ?? ChannelFailure(status: response.status, reason: "?")
                if failure.isAppWide { return .appRefused(failure) }
                guard failure.isRetryable else { return .rejected(status: response.status, reason: failure.reason) }
                if response.status != 429 { onlyRefusals = false }
                retryAfter = response.header("retry-after").flatMap { Int64($0) }
                last = failure.description
            case .notProcessed(let why):
                last = why
            case .lost(let why):
                return .uncertain(why)
            }
            guard self.options.retry.allowsRetry(after: attempts), self.stop?.reason == nil else {
                return onlyRefusals ? .notSent(last) : .uncertain("\(attempts) attempts, the last \(last)")
            }
            let delay = self.options.retry.delay(attempts: attempts, retryAfter: retryAfter, random: .random(in: 0..<1))
            await self.clock.sleep(nanoseconds: delay)
        }
    }
}

extension BroadcastJob.RowEnd: Equatable {}

/// The job's connection, opened again (a bounded number of times) after it was lost.
///
/// Every row in flight asks for it at once, at the start and after a loss: they share one connect (an actor method
/// that awaits lets the next caller in, which would otherwise open a connection of its own and count the same loss
/// again), so a job holds one connection and a lost connection is one reconnect.
actor Link {
    private let connect: @Sendable () async throws -> HTTP2Exchanger
    private let clock: any JobClock
    private var exchanger: HTTP2Exchanger?
    private var connecting: Task<HTTP2Exchanger?, Never>?
    private var reconnects = 0
    private(set) var failure: String?
    static let maximumReconnects = 5

    init(connect: @escaping @Sendable () async throws -> HTTP2Exchanger, clock: any JobClock) {
        self.connect = connect
        self.clock = clock
    }

    /// The open connection, or nil once it cannot be opened.
    func current() async -> HTTP2Exchanger? {
        if let exchanger, exchanger.isActive { return exchanger }
        if let connecting { return await connecting.value }
        guard self.failure == nil else { return nil }
        let again = self.exchanger != nil
        if again {
            self.reconnects += 1
            guard self.reconnects <= Self.maximumReconnects else {
                self.failure = "the connection was lost \(self.reconnects) times"
                return nil
            }
        }
        let pause = Duration.milliseconds(again ? 200 * self.reconnects : 0)
        let connect = self.connect
        let clock = self.clock
        let attempt = Task<HTTP2Exchanger?, Never> {
            await clock.sleep(for: pause)
            do {
                let exchanger = try await connect()
                self.opened(exchanger)
                return exchanger
            } catch {
                self.failed("\(error)")
                return nil
            }
        }
        self.connecting = attempt
        return await attempt.value
    }

    private func opened(_ exchanger: HTTP2Exchanger) {
        self.exchanger = exchanger
        self.connecting = nil
    }

    private func failed(_ why: String) {
        self.failure = why
        self.connecting = nil
    }

    func close() async {
        await self.exchanger?.close()
    }
}
