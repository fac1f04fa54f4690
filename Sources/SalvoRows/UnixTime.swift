/// UNIX seconds to and from the two ways token files write a time: plain seconds and ISO 8601.
///
/// Pure and allocation-free when parsing (the prune and `--suppress` paths read a time per row).
public enum UnixTime {
    /// `seconds` as ISO 8601 in UTC: `2026-11-23T17:29:49Z`.
    public static func iso8601(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let within = seconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(year)
        let paddedYear = String(repeating: "0", count: max(0, 4 - yearText.count)) + yearText
        return
            "\(paddedYear)-\(two(month))-\(two(day))T\(two(within / 3600)):\(two(within / 60 % 60)):\(two(within % 60))Z"
    }

    /// UNIX seconds (digits, optionally signed) or ISO 8601 (`YYYY-MM-DD`, optionally `THH:MM[:SS[.fff]]`, then
    /// `Z`, `±HH[:MM]` or nothing for UTC); nil for anything else. Fractions of a second are dropped.
    public static func parse(_ text: UnsafeRawBufferPointer) -> Int64? {
        var start = 0
        var end = text.count
        while start < end && (text[start] == 0x20 || text[start] == 0x09) { start += 1 }
        while end > start && (text[end - 1] == 0x20 || text[end - 1] == 0x09) { end -= 1 }
        guard start < end else { return nil }
        if let seconds = Self.integer(text, start, end) { return seconds }
        return Self.iso(text, start, end)
    }

    /// `parse` over a string.
    public static func parse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { Self.parse(UnsafeRawBufferPointer($0)) }
    }

    private static func integer(_ text: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int64? {
        var cursor = start
        var negative = false
        if text[cursor] == UInt8(ascii: "-") || text[cursor] == UInt8(ascii: "+") {
            negative = text[cursor] == UInt8(ascii: "-")
            cursor += 1
        }
        guard cursor < end, end - cursor <= 15 else { return nil }
        var value: Int64 = 0
        while cursor < end {
            let digit = text[cursor] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int64(digit)
            cursor += 1
        }
        return negative ? -value : value
    }

    private static func iso(_ text: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int64? {
        var cursor = start
        func digits(_ count: Int) -> Int64? {
            guard cursor + count <= end else { return nil }
            var value: Int64 = 0
            for _ in 0..<count {
                let digit = text[cursor] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int64(digit)
                cursor += 1
            }
            return value
        }
        func expect(_ character: UInt8) -> Bool {
            guard cursor < end, text[cursor] == character else { return false }
            cursor += 1
            return true
        }
        guard let year = digits(4), expect(UInt8(ascii: "-")), let month = digits(2), expect(UInt8(ascii: "-")),
            let day = digits(2), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var seconds = Self.days(year: year, month: month, day: day) * 86_400
        if cursor == end { return seconds }
        guard expect(UInt8(ascii: "T")) || expect(UInt8(ascii: " ")) || expect(UInt8(ascii: "t")) else { return nil }
        guard let hour = digits(2), expect(UInt8(ascii: ":")), let minute = digits(2), hour < 24, minute < 60
        else { return nil }
        seconds += hour * 3600 + minute * 60
        if expect(UInt8(ascii: ":")) {
            guard let second = digits(2), second <= 60 else { return nil }
            seconds += second
            if expect(UInt8(ascii: ".")) || expect(UInt8(ascii: ",")) {
                let fraction = cursor
                while cursor < end, text[cursor] &- UInt8(ascii: "0") < 10 { cursor += 1 }
                guard cursor > fraction else { return nil }
            }
        }
        if cursor == end || expect(UInt8(ascii: "Z")) || expect(UInt8(ascii: "z")) {
            return cursor == end ? seconds : nil
        }
        let sign: Int64
        if expect(UInt8(ascii: "+")) {
            sign = 1
        } else if expect(UInt8(ascii: "-")) {
            sign = -1
        } else {
            return nil
        }
        guard let offsetHours = digits(2), offsetHours < 24 else { return nil }
        var offset = offsetHours * 3600
        _ = expect(UInt8(ascii: ":"))
        if cursor < end {
            guard let offsetMinutes = digits(2), offsetMinutes < 60 else { return nil }
            offset += offsetMinutes * 60
        }
        guard cursor == end else { return nil }
        return seconds - sign * offset
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day since 1970-01-01 (`civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
