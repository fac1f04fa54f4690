/// A Live Activity payload's `aps.event`.
public enum LiveActivityEvent: String, CaseIterable, Sendable, Hashable, Comparable {
    /// Push-to-start: starts an activity from the token of `pushToStartTokenUpdates` (iOS 17.2).
    case start
    case update
    case end

    public static func < (lhs: Self, rhs: Self) -> Bool {
        Self.allCases.firstIndex(of: lhs)! < Self.allCases.firstIndex(of: rhs)!
    }
}

/// One finding of `LiveActivityCheck`, naming the field it is about.
public struct LiveActivityIssue: Hashable, Sendable, CustomStringConvertible {
    public enum Severity: Hashable, Sendable {
        /// APNs or the device would refuse or drop the notification: not sent.
        case error
        /// Sent, but worth knowing (a budgeted priority, a field the event ignores).
        case warning
    }

    public var severity: Severity
    /// The field, as a path from the payload's top (`aps.timestamp`).
    public var field: String
    public var message: String

    public init(_ severity: Severity, _ field: String, _ message: String) {
        self.severity = severity
        self.field = field
        self.message = message
    }

    public var description: String { "\(self.field): \(self.message)" }
}

/// A time field of a Live Activity payload: where its value comes from.
public enum LiveActivityTime: Hashable, Sendable {
    /// Written in the payload (UNIX seconds).
    case fixed(Int64)
    /// The send time plus seconds (`"{{$now}}"`, `"{{$now+900}}"`).
    case sendTime(offset: Int64)
    /// A row's column, as a whole integer (`"{{column:int}}"`).
    case column(String)
}

/// What every row of a template must still satisfy, where the template takes a Live Activity field from a column:
/// the event (the events the template's structure allows), and the dismissal date against the timestamp.
public struct LiveActivityRowRule: Hashable, Sendable {
    /// The column `aps.event` comes from, and the events a row may name there.
    public var eventColumn: String?
    public var events: [LiveActivityEvent] = LiveActivityEvent.allCases
    /// `aps.dismissal-date` and `aps.timestamp`, when at least one of them comes from a column.
    public var dismissalDate: LiveActivityTime?
    public var timestamp: LiveActivityTime?

    public init() {}

    /// Whether any row needs checking.
    public var isEmpty: Bool { self.eventColumn == nil && self.dismissalDate == nil }
}

/// What `LiveActivityCheck` found: the issues, the events the payload may carry, and the rule left for each row.
public struct LiveActivityReport: Hashable, Sendable {
    public var issues: [LiveActivityIssue] = []
    /// The events the payload may carry: the one it names, or those its column may name.
    public var events: [LiveActivityEvent] = []
    /// Nil when nothing is left to check per row.
    public var rowRule: LiveActivityRowRule?

    public var errors: [LiveActivityIssue] { self.issues.filter { $0.severity == .error } }
    public var warnings: [LiveActivityIssue] { self.issues.filter { $0.severity == .warning } }
}

/// The rules of a Live Activity notification (`apns-push-type: liveactivity`), checked before it is sent, on a
/// payload or on a template's structure (placeholders and all): the static parts once, and what a column fills left
/// to `LiveActivityRowRule`, checked per row.
///
/// Apple, "Starting and updating Live Activities with ActivityKit push notifications" and "Displaying live data with
/// Live Activities": `timestamp` (UNIX seconds; the newest update wins) and `event` (`start`, `update`, `end`) are
/// required; updates and starts carry `content-state`; `dismissal-date` (with `end`) removes the activity at once
/// when past, and otherwise must fall within 4 hours; a push-to-start (`event: start`, iOS 17.2) carries `alert`,
/// `attributes-type` and `attributes`, and only it may ask for an update token (`input-push-token: 1`) or subscribe
/// to a channel (`input-push-channel`, iOS 18); the payload is at most 4 KB; priority 10 is charged against the
/// activity's hourly budget (5 is not).
public enum LiveActivityCheck {
    /// How long after its timestamp an ended activity may stay on the Lock Screen.
    public static let maximumDismissalDelay: Int64 = 4 * 3600
    /// The payload limit of a Live Activity notification (the HTTP/2 API's 4 KB).
    public static let limit = PayloadLimit.http2

    /// Checks a template's structure: its placeholders are what the rows fill.
    ///
    /// - Parameters:
    ///   - priority: the `apns-priority` it goes with (nil: 10).
    ///   - now: the time of the check (UNIX seconds): the send time is no earlier.
    public static func check(
        template: PayloadTemplate,
        priority: NotificationPriority?,
        now: Int64
    ) -> LiveActivityReport {
        guard let parsed = try? JSONScanner.parse(template.placeholderText) else {
            return LiveActivityReport(issues: [LiveActivityIssue(.error, "payload", "not valid JSON")])
        }
        return Self.check(
            parsed.value,
            byteCount: template.probe.byteCount,
            templated: true,
            priority: priority,
            now: now
        )
    }

    /// Checks a payload sent as it is (no placeholders).
    public static func check(payload: Payload, priority: NotificationPriority?, now: Int64) -> LiveActivityReport {
        Self.check(payload.value, byteCount: payload.byteCount, templated: false, priority: priority, now: now)
    }

    // MARK: - The structure

    /// Where a value comes from.
    enum Source: Equatable {
        case literal(JSONValue)
        case sendTime(offset: Int64)
        /// A column: `integer` for `"{{column:int}}"`.
        case column(String, integer: Bool)
        /// A string mixing placeholders and text.
        case mixed
    }

    static func source(_ value: JSONValue, templated: Bool) -> Source {
        guard templated, case .string(let text) = value, text.contains("{{") else { return .literal(value) }
        guard text.hasPrefix("{{"), text.hasSuffix("}}"), text.count > 4 else { return .mixed }
        let inner = String(text.dropFirst(2).dropLast(2))
        guard !inner.contains("{{"), !inner.contains("}}") else { return .mixed }
        let name = inner.filter { $0 != " " }
        if let offset = PayloadTemplate.sendTimeOffset(name) { return .sendTime(offset: offset) }
        if name.hasSuffix(":int") { return .column(String(name.dropLast(4)), integer: true) }
        return .column(name, integer: false)
    }

    /// A time field's value, or why it is not one.
    enum TimeValue {
        case success(LiveActivityTime)
        case failure(String)
    }

    static func time(_ source: Source) -> TimeValue {
        switch source {
        case .literal(.number(let literal)):
            guard let seconds = Int64(literal) ?? Double(literal).flatMap({ $0.isFinite ? Int64($0) : nil }) else {
                return .failure("\(literal) is not UNIX seconds")
            }
            return .success(.fixed(seconds))
        case .sendTime(let offset): return .success(.sendTime(offset: offset))
        case .column(let name, true): return .success(.column(name))
        case .column(let name, false):
            return .failure("\"{{\(name)}}\" fills a string: write \"{{\(name):int}}\" (UNIX seconds)")
        case .mixed:
            return .failure("a string of text and placeholders: write UNIX seconds, \"{{column:int}}\" or \"{{$now}}\"")
        case .literal(let value):
            return .failure("\(value.kindName), not UNIX seconds: write a number, \"{{column:int}}\" or \"{{$now}}\"")
        }
    }

    static func check(
        _ payload: JSONValue,
        byteCount: Int,
        templated: Bool,
        priority: NotificationPriority?,
        now: Int64
    ) -> LiveActivityReport {
        var report = LiveActivityReport()
        func add(_ severity: LiveActivityIssue.Severity, _ field: String, _ message: String) {
            report.issues.append(LiveActivityIssue(severity, "aps." + field, message))
        }
        guard case .object(let members) = payload["aps"] ?? .null else {
            report.issues.append(LiveActivityIssue(.error, "aps", "missing: a Live Activity's fields live in aps"))
            return report
        }
        let aps = JSONValue.object(members)
        func field(_ key: String) -> Source? { aps[key].map { Self.source($0, templated: templated) } }

        // timestamp: required, a time.
        var timestamp: LiveActivityTime?
        switch field("timestamp").map(Self.time) {
        case nil:
            add(
                .error,
                "timestamp",
                "missing: the device keeps the update with the newest timestamp; write \"{{$now}}\" to have the send "
                    + "time filled in"
            )
        case .failure(let why)?:
            add(.error, "timestamp", why)
        case .success(let time)?:
            timestamp = time
            if case .fixed(let seconds) = time, seconds < now - 3600 {
                add(
                    .warning,
                    "timestamp",
                    "\(seconds) is over an hour before now: an activity that had a newer update ignores this one; "
                        + "\"{{$now}}\" takes the send time"
                )
            }
        }

        // event: required; one, or a column whose rows the structure limits.
        var eventColumn: String?
        var candidates: [LiveActivityEvent] = []
        switch field("event") {
        case nil:
            add(.error, "event", "missing: start, update or end")
        case .literal(.string(let name))?:
            if let event = LiveActivityEvent(rawValue: name) {
                candidates = [event]
            } else {
                add(.error, "event", "is '\(name)': start, update or end")
            }
        case .column(let name, false)?:
            eventColumn = name
            candidates = LiveActivityEvent.allCases
        case let other?:
            let what = if case .literal(let value) = other { value.kindName } else { "not one column" }
            add(.error, "event", "is \(what): start, update or end, or one column (\"{{event}}\")")
        }

        // What depends on the event, per event the payload may carry.
        var allowed: [LiveActivityEvent] = []
        var refusals: [(LiveActivityEvent, [LiveActivityIssue])] = []
        for event in candidates {
            let issues = Self.eventIssues(event, field: field)
            if issues.contains(where: { $0.severity == .error }) {
                refusals.append((event, issues))
            } else {
                allowed.append(event)
            }
            if candidates.count == 1 { report.issues += issues }
        }
        if let eventColumn {
            if allowed.isEmpty {
                for (event, issues) in refusals {
                    for issue in issues where issue.severity == .error {
                        add(.error, String(issue.field.dropFirst(4)), "(event \(event)) \(issue.message)")
                    }
                }
            } else if allowed.count < candidates.count {
                let why = refusals.map { event, issues in
                    "\(event): \(issues.first { $0.severity == .error }!.message)"
                }
                add(
                    .warning,
                    "event",
                    "from column '\(eventColumn)': rows may name \(Self.list(allowed)); others are refused ("
                        + why.joined(separator: "; ") + ")"
                )
            }
        }
        report.events = eventColumn == nil ? candidates.filter { allowed.contains($0) } : allowed

        // Fields whatever the event.
        if let state = field("content-state"), !Self.isObject(state) {
            add(.error, "content-state", "must be an object (the activity's ContentState)")
        }
        if let score = field("relevance-score") {
            switch score {
            case .literal(.number), .column(_, true): break
            default: add(.error, "relevance-score", "must be a number (or \"{{column:int}}\")")
            }
        }
        if let alert = field("alert") {
            switch alert {
            case .literal(.object), .literal(.string), .column(_, false), .mixed: break
            default: add(.error, "alert", "must be an object (title, body, sound) or a string")
            }
        }
        switch field("stale-date").map(Self.time) {
        case .failure(let why)?: add(.error, "stale-date", why)
        case .success(let stale)?:
            if let timestamp, let gap = Self.gap(from: timestamp, to: stale, now: now), gap <= 0 {
                add(.warning, "stale-date", "is not after aps.timestamp: the activity shows as stale at once")
            }
        case nil: break
        }
        var rule = LiveActivityRowRule()
        switch field("dismissal-date").map(Self.time) {
        case .failure(let why)?: add(.error, "dismissal-date", why)
        case .success(let dismissal)?:
            if let timestamp {
                if let gap = Self.gap(from: timestamp, to: dismissal, now: now) {
                    if gap > Self.maximumDismissalDelay {
                        add(.error, "dismissal-date", Self.tooLate(gap))
                    }
                } else {
                    rule.dismissalDate = dismissal
                    rule.timestamp = timestamp
                }
            }
        case nil: break
        }

        if byteCount > Self.limit.bytes {
            add(.error, "", "\(byteCount) bytes, over \(Self.limit): a Live Activity payload takes at most 4 KB")
        }
        if (priority ?? .immediate) == .immediate {
            add(
                .warning,
                "",
                "priority 10 is charged against the activity's hourly budget (Apple names no number; going over "
                    + "throttles); --priority 5 is not charged"
            )
        }
        report.issues = report.issues.map { issue in
            var issue = issue
            if issue.field.hasSuffix(".") { issue.field.removeLast() }
            return issue
        }
        rule.eventColumn = eventColumn
        if eventColumn != nil { rule.events = allowed }
        report.rowRule = rule.isEmpty || report.errors.count > 0 ? nil : rule
        return report
    }

    /// The checks that depend on the event.
    static func eventIssues(_ event: LiveActivityEvent, field: (String) -> Source?) -> [LiveActivityIssue] {
        var issues: [LiveActivityIssue] = []
        func add(_ severity: LiveActivityIssue.Severity, _ name: String, _ message: String) {
            issues.append(LiveActivityIssue(severity, "aps." + name, message))
        }
        if event != .end && field("content-state") == nil {
            add(
                .error,
                "content-state",
                "missing: \(event == .start ? "a start" : "an update") carries the activity's ContentState"
            )
        }
        if event == .start {
            switch field("alert") {
            case nil: add(.error, "alert", "missing: a push-to-start (event start) carries an alert")
            case .literal(.object)?, .column?, .mixed?: break
            case .literal?, .sendTime?: add(.error, "alert", "a push-to-start's alert is an object (title, body)")
            }
            switch field("attributes-type") {
            case nil: add(.error, "attributes-type", "missing: a push-to-start names its ActivityAttributes type")
            case .literal(.string(let name))? where !name.isEmpty: break
            case .column(_, false)?, .mixed?: break
            default: add(.error, "attributes-type", "must be the ActivityAttributes type's name, a string")
            }
            switch field("attributes") {
            case nil: add(.error, "attributes", "missing: a push-to-start carries the activity's attributes")
            case .literal(.object)?: break
            default: add(.error, "attributes", "must be an object (the activity's attributes)")
            }
            switch field("input-push-token") {
            case nil, .literal(.number("1"))?, .column(_, true)?: break
            default: add(.error, "input-push-token", "must be 1 (the started activity issues an update token)")
            }
            switch field("input-push-channel") {
            case nil, .column(_, false)?, .mixed?: break
            case .literal(.string(let id))? where ChannelIDFormat.isWellFormed(id): break
            case .literal(.string(let id))?:
                add(.error, "input-push-channel", "'\(id)' is not a channel id (base64, as APNs issues them)")
            default: add(.error, "input-push-channel", "must be a channel id, a string")
            }
        } else {
            for name in ["input-push-token", "input-push-channel"] where field(name) != nil {
                add(
                    .error,
                    name,
                    "only a push-to-start (event start) takes it: an \(event) cannot change how the activity is "
                        + "updated"
                )
            }
            for name in ["attributes-type", "attributes"] where field(name) != nil {
                add(.warning, name, "only a push-to-start (event start) reads it; an \(event) ignores it")
            }
        }
        if event != .end && field("dismissal-date") != nil {
            add(.warning, "dismissal-date", "goes with event end; an \(event) ignores it")
        }
        return issues
    }

    /// Seconds from `start` to `end` when known before sending (the send time is no earlier than `now`); nil
    /// when a column decides.
    static func gap(from start: LiveActivityTime, to end: LiveActivityTime, now: Int64) -> Int64? {
        switch (start, end) {
        case (.fixed(let a), .fixed(let b)): b - a
        case (.sendTime(let a), .sendTime(let b)): b - a
        // The send time is at least `now`: the gap only shrinks.
        case (.sendTime(let a), .fixed(let b)): b - (now + a)
        case (.fixed(let a), .sendTime(let b)): (now + b) - a
        default: nil
        }
    }

    static func tooLate(_ gap: Int64) -> String {
        "is \(gap / 3600) h \(gap % 3600 / 60) min after aps.timestamp: an ended activity stays at most 4 hours (a "
            + "past date removes it at once)"
    }

    static func isObject(_ source: Source) -> Bool {
        if case .literal(.object) = source { return true }
        return false
    }

    static func list(_ events: [LiveActivityEvent]) -> String {
        let names = events.sorted().map(\.rawValue)
        return names.count <= 1 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}
