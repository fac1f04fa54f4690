import APNSWire
import Foundation

extension Preflight {
    /// Whether the send would go as Live Activity notifications (HTTP/2, `--push-type liveactivity`).
    static func sendsLiveActivities(_ request: Request) -> Bool {
        request.http2 != nil && request.pushType == .liveActivity
    }

    /// A payload file checked as a Live Activity notification (`LiveActivityCheck`): each error fails, each warning
    /// (priority 10 is budgeted, a field the event ignores) is a warning line, and an ok line names the events.
    public static func liveActivity(file: String, priority: NotificationPriority, now: Int64) -> [CheckResult] {
        guard let data = FileManager.default.contents(atPath: file),
            let payload = try? Payload(jsonBytes: [UInt8](data))
        else { return [] }  // The payload check names what is wrong with the file.
        return Self.results(file, LiveActivityCheck.check(payload: payload, priority: priority, now: now))
    }

    /// Templates checked as Live Activity notifications: the results, and the templates carrying what each row must
    /// still meet (for the token files' check, which then names each row that breaks it).
    public static func liveActivity(
        templates: PayloadTemplates,
        priority: NotificationPriority,
        now: Int64
    ) -> (results: [CheckResult], templates: PayloadTemplates) {
        let (checked, reports) = templates.checkingLiveActivity(priority: priority, now: now)
        return (reports.flatMap { Self.results($0.file, $0.report) }, checked)
    }

    private static func results(_ file: String, _ report: LiveActivityReport) -> [CheckResult] {
        let name = "live activity"
        var results = report.errors.map { CheckResult.fail(name, "\(file): \($0)") }
        results += report.warnings.map { CheckResult.warning(name, "\(file): \($0)") }
        if report.errors.isEmpty {
            let events = report.events.map(\.rawValue).joined(separator: ", ")
            let rows = report.rowRule == nil ? "" : "; each row's column-filled fields are checked too"
            results.append(.ok(name, "\(file): event \(events), timestamp, fields as Apple documents them\(rows)"))
        }
        return results
    }
}
