/// A `LiveActivityRowRule` bound to the columns of a job's templates: what `PayloadTemplates.measure` checks per
/// row, reading only the fields the rule names (no allocation, no parse beyond an integer).
public struct LiveActivityRowCheck: Sendable {
    enum Time: Sendable {
        case fixed(Int64)
        case sendTime(offset: Int64)
        case column(Int)
    }

    let eventColumn: Int?
    let eventName: String
    /// The events a row may name, as bytes.
    let events: [[UInt8]]
    let allowed: String
    let dismissalDate: Time?
    let timestamp: Time?
    let dismissalName: String

    /// Binds `rule` to `columns` (a job's `PayloadTemplates.columns`); nil when it names a column not there (the
    /// template's own columns always are).
    public init?(_ rule: LiveActivityRowRule, columns: [String]) {
        let lowered = columns.map { $0.lowercased() }
        func index(_ name: String) -> Int? { lowered.firstIndex(of: name.lowercased()) }
        func bind(_ time: LiveActivityTime?) -> Time?? {
            switch time {
            case nil: return .some(nil)
            case .fixed(let seconds)?: return .fixed(seconds)
            case .sendTime(let offset)?: return .sendTime(offset: offset)
            case .column(let name)?: return index(name).map { .column($0) }
            }
        }
        if let name = rule.eventColumn {
            guard let column = index(name) else { return nil }
            self.eventColumn = column
            self.eventName = name
        } else {
            self.eventColumn = nil
            self.eventName = ""
        }
        self.events = rule.events.map { Array($0.rawValue.utf8) }
        self.allowed = LiveActivityCheck.list(rule.events)
        guard let dismissal = bind(rule.dismissalDate), let timestamp = bind(rule.timestamp) else { return nil }
        self.dismissalDate = dismissal
        self.timestamp = timestamp
        if case .column(let name)? = rule.dismissalDate {
            self.dismissalName = "from column '\(name)' "
        } else {
            self.dismissalName = ""
        }
    }

    /// Why the row with `fields` may not go, or nil. A field the row lacks, or an integer slot's field that is not an
    /// integer, is left to the template's own measure (`PayloadTemplate.renderedCount`), which names it.
    public func check(_ fields: PayloadFields) -> PayloadRowError? {
        if let column = self.eventColumn, let field = fields.field(column) {
            guard self.events.contains(where: { $0.elementsEqual(field) }) else {
                var text = String(decoding: field, as: UTF8.self)
                if text.count > 40 { text = String(text.prefix(37)) + "..." }
                return PayloadRowError(
                    code: .liveActivity,
                    message:
                        "aps.event from column '\(self.eventName)' is '\(text)': this template takes \(self.allowed)"
                )
            }
        }
        if let date = self.dismissalDate, let timestamp = self.timestamp,
            let dismissal = Self.seconds(date, fields), let from = Self.seconds(timestamp, fields),
            dismissal - from > LiveActivityCheck.maximumDismissalDelay
        {
            return PayloadRowError(
                code: .liveActivity,
                message: "aps.dismissal-date \(self.dismissalName)\(LiveActivityCheck.tooLate(dismissal - from))"
            )
        }
        return nil
    }

    /// A time's value for a row: nil when a column's field is missing or not an integer, or the send time is not
    /// known (none read).
    static func seconds(_ time: Time, _ fields: PayloadFields) -> Int64? {
        switch time {
        case .fixed(let seconds): return seconds
        case .sendTime(let offset): return fields.sendTime == 0 ? nil : fields.sendTime + offset
        case .column(let column):
            guard let field = fields.field(column), JSONEscaping.isInteger(field) else { return nil }
            var value: Int64 = 0
            var negative = false
            for byte in field {
                if byte == UInt8(ascii: "-") {
                    negative = true
                    continue
                }
                let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                guard !overflow else { return nil }
                value = times &+ Int64(byte - UInt8(ascii: "0"))
            }
            return negative ? -value : value
        }
    }
}

extension PayloadRowError.Code {
    /// A Live Activity rule a row's fields break (`LiveActivityRowCheck`).
    public static let liveActivity = PayloadRowError.Code("liveActivity")
}

extension PayloadTemplates {
    /// These templates checked as Live Activity payloads (`LiveActivityCheck`): each template's report, and the
    /// templates carrying the rules their rows must meet (`measure` then refuses a row that breaks one, naming the
    /// field). A template with errors gets no row rule: it is not sent at all.
    ///
    /// - Parameters:
    ///   - priority: the `apns-priority` they go with (nil: 10).
    ///   - now: UNIX seconds; the send time is no earlier.
    public func checkingLiveActivity(
        priority: NotificationPriority?,
        now: Int64
    ) -> (templates: PayloadTemplates, reports: [(file: String, report: LiveActivityReport)]) {
        var copy = self
        var reports: [(file: String, report: LiveActivityReport)] = []
        var checks: [LiveActivityRowCheck?] = []
        for template in self.templates {
            let report = LiveActivityCheck.check(template: template, priority: priority, now: now)
            reports.append((template.file, report))
            checks.append(report.rowRule.flatMap { LiveActivityRowCheck($0, columns: self.columns) })
        }
        copy.rowChecks = checks.contains { $0 != nil } ? checks : nil
        return (copy, reports)
    }
}
