import APNSWire
import ArgumentParser
import Foundation
import SalvoBroadcast
import SalvoConsole
import SalvoHTTP2
import SalvoRows

/// `salvo broadcast CHANNELS.csv --payload-template FILE --bundle-id ID …`
struct BroadcastCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast",
        abstract: "Broadcast a Live Activity update to every channel of a CSV (one request per row).",
        discussion: """
            Each row's template is filled from its columns ("{{column}}", "{{column:int}}", "{{$now}}" for the send \
            time) and posted to /4/broadcasts/apps/<bundle id> with its channel_id. A row of a no-storage channel \
            (the inventory's policy none) refuses a nonzero --expiration before it is sent. With --journal a rerun \
            sends only the rows never sent: no update is broadcast twice, even after kill -9 (a row whose answer \
            was lost is listed as uncertain, not sent again). Exit status: 0 when every row was accepted; 1 when \
            some row was refused, uncertain or unsent; 3 when the job could not run; 64 for wrong arguments; 130 or \
            143 after SIGINT or SIGTERM.
            """
    )

    @Argument(help: "A CSV with a channel id column: a channel inventory, or any CSV (with the template's columns).")
    var channels: String

    @Option(name: .customLong("payload-template"), help: "The payload template (JSON with {{column}} slots).")
    var payloadTemplate: String

    @OptionGroup var service: BroadcastServiceOptions

    @Option(name: .customLong("channel-column"), help: "The channel id column: a header name or 1-based number.")
    var channelColumn = "channel_id"

    @Option(help: "apns-expiration: 0 (one attempt, nothing stored), UNIX seconds, or +SECONDS from now.")
    var expiration = "0"

    @Option(help: "apns-priority: 10 (now), 5 (power-friendly), 1 (never wakes the device).")
    var priority = 10

    @Option(help: "At most this many broadcasts per second (default: no cap).")
    var rate: Int?

    @Option(help: "Broadcasts in flight at once (1 to 1000).")
    var window = 64

    @Option(help: "Send only partition K of N (K/N, K from 0): the rows whose channel id hashes to K.")
    var partition: String?

    @Option(help: "Keep the job's journal in this folder: a rerun sends only the rows never sent.")
    var journal: String?

    @Option(help: "Write the report as JSON to this file.")
    var report: String?

    @Option(help: "Write refused rows (line, channel, status, reason) as CSV to this file.")
    var rejects: String?

    @Option(
        help: "Write the rows not settled (uncertain, not sent) as CSV to this file (default: REPORT.unsettled.csv)."
    )
    var unsettled: String?

    @Flag(help: "No progress line.")
    var quiet = false

    @OptionGroup var progressOptions: ProgressOptions
    @OptionGroup var observe: ObservabilityOptions

    func validate() throws {
        guard [10, 5, 1].contains(self.priority) else {
            throw ValidationError("--priority is 10, 5 or 1 (got \(self.priority))")
        }
        _ = try self.resolvedExpiration()
        if let partition, Partition(partition) == nil {
            throw ValidationError("--partition is K/N with 0 ≤ K < N (got \(partition))")
        }
        if let rate, rate < 1 { throw ValidationError("--rate is at least 1 (got \(rate))") }
        guard (1...1000).contains(self.window) else {
            throw ValidationError("--window is 1 to 1000 (got \(self.window))")
        }
    }

    func resolvedExpiration() throws(ValidationError) -> Int64 {
        if self.expiration.hasPrefix("+"), let relative = Int64(self.expiration.dropFirst()), relative >= 0 {
            return Int64(Date().timeIntervalSince1970) + relative
        }
        guard let absolute = Int64(self.expiration), absolute >= 0 else {
            throw ValidationError("--expiration is 0, UNIX seconds or +SECONDS (got \(self.expiration))")
        }
        return absolute
    }

    func run() async throws {
        try await exitingOnUserError { try await self.broadcast() }
    }

    private func broadcast() async throws {
        var options = BroadcastJob.Options(
            inputPath: self.channels,
            templateFile: self.payloadTemplate,
            bundleID: self.service.bundleID
        )
        options.channelColumn = self.channelColumn
        options.expiration = try self.resolvedExpiration()
        options.priority = self.priority
        options.environment = self.service.environment
        options.partition = self.partition.flatMap(Partition.init)
        options.journalDirectory = self.journal
        options.window = self.window
        options.rate = self.rate
        options.reportPath = self.report
        options.rejectsPath = self.rejects
        options.unsettledPath = self.unsettled ?? self.report.map { $0 + ".unsettled.csv" }
        var job = BroadcastJob(options: options)
        let stop = JobStop(grace: .seconds(2))
        job.stop = stop
        let display = ProgressDisplay(self.progressOptions.progress, quiet: self.quiet)
        let observability = try await self.observe.start(label: "salvo.broadcast")
        // Progress and metrics take the same snapshots, about twice a second.
        let metrics = observability.jobMetrics(dimensions: [("protocol", "broadcast")])
        let show = display.callback
        if show != nil || metrics != nil {
            job.progress = { snapshot in
                show?(snapshot)
                metrics?.update(snapshot)
            }
        }
        let signals = SignalStop(stop: stop)
        defer { signals.cancel() }
        let endpoint = try self.service.endpoint(push: true)
        let outcome: Swift.Result<BroadcastJob.Result, any Error>
        do {
            outcome = .success(try await job.run { try await HTTP2Exchanger.connect(endpoint) })
        } catch {
            outcome = .failure(error)
        }
        await observability.stop()
        let result: BroadcastJob.Result
        switch outcome {
        case .success(let value):
            result = value
        case .failure(let error as InputError):
            throw UserError(error.description)
        case .failure(let error as JobError):
            throw UserError(error.description)
        case .failure(let error as PayloadTemplateError):
            throw UserError(error.description)
        case .failure(let error):
            throw error
        }
        display.finish()
        let report = result.report
        var summary =
            "\(report.inputRows) rows: \(report.confirmed) broadcast, \(report.rejectedTotal + report.invalidInput) "
            + "refused, \(report.uncertain) uncertain, \(report.notSent) not sent"
        if let resumed = report.resumed, resumed.settledBefore + resumed.inheritedUncertain > 0 {
            summary += " (\(resumed.settledBefore) settled by an earlier run)"
        }
        print(summary + String(format: " in %.2f s", report.seconds))
        for reject in result.rejects.prefix(20) {
            printError("line \(reject.line) \(reject.channel): \(reject.reason)", prefix: "refused: ")
        }
        if result.rejects.count > 20 { printError("… and \(result.rejects.count - 20) more", prefix: "refused: ") }
        for failure in result.outputFailures { printError(failure) }
        if let signal = signals.signal { throw ExitCode(128 + signal) }
        if !result.outputFailures.isEmpty { throw ExitCode(3) }
        if signals.signal == nil, report.notSent > 0, let stopped = report.stopped {
            printError(stopped)
            throw ExitCode(3)
        }
        // The report's counts, not this run's lists: a rerun of a finished journal exits with its job's status.
        if report.rejectedTotal + report.invalidInput + report.uncertain + report.notSent > 0
            || !result.rejects.isEmpty || !result.unsettled.isEmpty
        {
            throw ExitCode(1)
        }
    }
}
