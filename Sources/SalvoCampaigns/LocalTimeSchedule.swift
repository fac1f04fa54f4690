import Foundation

/// A time of day on a wall clock, `HH:MM` (00:00 to 23:59).
public struct LocalTime: Hashable, Sendable, CustomStringConvertible {
    public let hour: Int
    public let minute: Int

    public init?(hour: Int, minute: Int) {
        guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        self.hour = hour
        self.minute = minute
    }

    /// `HH:MM`, two digits each; nil for anything else (`9:00`, `25:00`, `09:60`, `09:00:00`).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 5, bytes[2] == UInt8(ascii: ":"),
            [0, 1, 3, 4].allSatisfy({ bytes[$0] >= 0x30 && bytes[$0] <= 0x39 })
        else { return nil }
        let digit = { (index: Int) in Int(bytes[index] - 0x30) }
        self.init(hour: digit(0) * 10 + digit(1), minute: digit(3) * 10 + digit(4))
    }

    public var description: String {
        (self.hour < 10 ? "0" : "") + String(self.hour) + ":" + (self.minute < 10 ? "0" : "") + String(self.minute)
    }
}

/// Where the rows of a local-time campaign go whose zone is empty or not a known IANA zone.
public enum LocalFallback: Hashable, Sendable, CustomStringConvertible {
    /// At the local time in this zone.
    case zone(String)
    /// Not sent: listed, with their line, among the campaign's fallback rows.
    case skip

    /// `skip`, or a zone's IANA name (`UTC`, `Europe/Paris`); nil for an unknown zone.
    public init?(_ text: String) {
        if text == "skip" {
            self = .skip
        } else if LocalTimeSchedule.zone(text) != nil {
            self = .zone(text)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .zone(let name): name
        case .skip: "skip"
        }
    }
}

/// When each row of a local-time campaign is sent (`deliver_at_local`): at the settings' wall-clock time in the
/// row's zone, on the campaign's day there — the first occurrence of that time whose minute has not ended at the
/// campaign's start (`start`), so that the rows of every zone go within the 26 hours after it. A time that does not
/// exist that day in a zone (a daylight-saving gap: 02:30 on the night clocks go from 02:00 to 03:00) goes at the
/// first minute after the gap; a time that happens twice (clocks going back) goes the first time.
///
/// Rows are grouped by that instant, never held one by one: every IANA zone is at one of about forty offsets, so a
/// day has at most about forty distinct instants (and one more for the fallback). `next` says, for the groups and
/// which of them are sent, what to do at `now`: send one, wait until a time, or nothing is left. A value with no I/O
/// and no clock of its own; `LocalTimePlan` groups the rows, `CampaignRunner` carries the steps out.
public struct LocalTimeSchedule: Hashable, Sendable {
    public let time: LocalTime
    public let fallback: LocalFallback
    /// The campaign's start, milliseconds since 1970.
    public let start: Int64

    public init(time: LocalTime, fallback: LocalFallback, start: Int64) {
        self.time = time
        self.fallback = fallback
        self.start = start
    }

    /// Where one row goes.
    public enum Placement: Hashable, Sendable {
        /// At this instant (milliseconds since 1970), its own zone's.
        case zone(Int64)
        /// At the fallback's instant (nil: `skip`, not sent), with why its zone was not used.
        case fallback(Int64?, reason: String)

        /// When the row goes, nil when it is skipped.
        public var instant: Int64? {
            switch self {
            case .zone(let instant): instant
            case .fallback(let instant, _): instant
            }
        }
    }

    /// Where a row whose zone column holds `zone` goes.
    public func placement(zone text: String) -> Placement {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return .fallback(self.fallbackInstant, reason: "no time zone") }
        guard let zone = Self.zone(trimmed) else {
            return .fallback(self.fallbackInstant, reason: "unknown time zone")
        }
        return .zone(Self.instant(of: self.time, in: zone, start: self.start))
    }

    /// The fallback's instant; nil for `skip`.
    public var fallbackInstant: Int64? {
        switch self.fallback {
        case .skip: return nil
        case .zone(let name):
            // `LocalFallback` holds only known zones.
            guard let zone = Self.zone(name) else { return nil }
            return Self.instant(of: self.time, in: zone, start: self.start)
        }
    }

    /// The first instant at which the wall clocks of `zone` show `time` and whose minute has not ended at `start`
    /// (milliseconds since 1970; so an instant up to 59.999 s before `start` when `start` is within that minute).
    /// In a gap, the first minute after it; of a time shown twice, the first.
    public static func instant(of time: LocalTime, in zone: TimeZone, start: Int64) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        // The date in that zone of the minute before `start`'s: the time that day, or else the day after, is the
        // first whose minute ends after `start`.
        let after = start - 60_000
        let day = calendar.dateComponents(
            [.year, .month, .day],
            from: Date(timeIntervalSince1970: Double(after) / 1000)
        )
        guard let midnight = Self.utc.date(from: day) else { return start }
        for offset in 0...2 {
            let date = Self.utc.dateComponents(
                [.year, .month, .day],
                from: midnight.addingTimeInterval(Double(offset) * 86_400)
            )
            let candidate = Self.wallClock(time, on: date, in: zone)
            if candidate > after { return candidate }
        }
        // Not reached for a real zone (every day has the time, or the minute after its gap).
        return start
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The instant of `time` on the day `parts` in `zone`: its first occurrence, or the end of the gap it falls in.
    static func wallClock(_ time: LocalTime, on parts: DateComponents, in zone: TimeZone) -> Int64 {
        // The wall-clock time read as UTC, less the zone's offset in force at the instant that makes: the offsets the
        // zone has around that day are each tried, and the ones that hold at their own instant are the answers.
        var wall = parts
        wall.hour = time.hour
        wall.minute = time.minute
        wall.second = 0
        guard let naive = Self.utc.date(from: wall) else { return 0 }
        let seconds = naive.timeIntervalSince1970
        // Each offset the zone has near that day: the instant is `naive - offset` for the offset in force then.
        var candidates: [Double] = []
        for probe in [-86_400.0, -43_200, 0, 43_200, 86_400] {
            let offset = Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: seconds + probe)))
            let instant = seconds - offset
            if Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: instant))) == offset {
                candidates.append(instant)
            }
        }
        if let first = candidates.min() { return Int64(first * 1000) }
        // In a gap: no offset makes that wall time. The gap ends at the transition after the time with the offset
        // before it: the first minute after the gap.
        let before = Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: seconds - 86_400)))
        let start = Date(timeIntervalSince1970: seconds - before - 86_400)
        if let transition = zone.nextDaylightSavingTimeTransition(after: start) {
            return Int64(transition.timeIntervalSince1970 * 1000)
        }
        return Int64((seconds - before) * 1000)
    }

    /// The zone of an IANA name (`Europe/Paris`, `Asia/Kolkata`, `UTC`), nil for a name that is not one. The zone
    /// database's `Area/Location` names are taken (old ones such as `Asia/Calcutta` too), with `UTC` and `GMT`; not
    /// abbreviations and offsets such as `CET`, `PST` or `GMT+1`, which Foundation would read, nor another letter case.
    public static func zone(_ name: String) -> TimeZone? {
        guard !name.isEmpty, name.utf8.count <= 64 else { return nil }
        guard name == "UTC" || name == "GMT" || Self.knownZones.contains(name) || Self.isAreaLocation(name) else {
            return nil
        }
        return TimeZone(identifier: name)
    }

    /// `Area/Location` (`America/Argentina/Buenos_Aires`, `Etc/GMT+5`): parts that begin with a capital letter, of
    /// letters, digits, `_`, `-` and `+`.
    static func isAreaLocation(_ name: String) -> Bool {
        let parts = name.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count >= 2 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
            return part.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
            }
        }
    }

    /// The names the zone database lists (ICU's: some current names, `Asia/Kolkata` say, are missing and taken by
    /// their form).
    private static let knownZones = Set(TimeZone.knownTimeZoneIdentifiers)

    // MARK: Steps

    /// One group: the rows that go at one instant.
    public struct Group: Hashable, Sendable {
        /// Milliseconds since 1970.
        public var instant: Int64
        public var rows: Int

        public init(instant: Int64, rows: Int) {
            self.instant = instant
            self.rows = rows
        }
    }

    /// What to do next.
    public enum Step: Hashable, Sendable {
        /// Send the group at this index (its instant has come).
        case send(Int)
        /// Nothing is due before this instant (the next group's).
        case wait(until: Int64)
        /// Every group is sent.
        case finished
    }

    /// The next step for `groups` (in order of instant) of which the indices in `sent` are sent, at `now`: the
    /// earliest group not sent, as soon as its instant has come.
    public static func next(groups: [Group], sent: Set<Int>, now: Int64) -> Step {
        guard let index = groups.indices.first(where: { !sent.contains($0) }) else { return .finished }
        return groups[index].instant <= now ? .send(index) : .wait(until: groups[index].instant)
    }

    /// The instant of the next group not sent and the rows of every group not sent.
    public static func waiting(groups: [Group], sent: Set<Int>) -> (next: Int64?, rows: Int) {
        let left = groups.indices.filter { !sent.contains($0) }
        return (left.first.map { groups[$0].instant }, left.reduce(0) { $0 + groups[$1].rows })
    }
}
