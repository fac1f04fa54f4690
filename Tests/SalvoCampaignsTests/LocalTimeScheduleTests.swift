import Foundation
import SalvoCampaigns
import SalvoTestTraits
import Testing

/// When each row of a local-time campaign goes, without a socket or a file: the settings' wall-clock time in the
/// row's zone on the campaign's day there (zones at :30 and :45, either side of the date line), the minute after a
/// daylight-saving gap, the first of a time shown twice, the fallback for an empty or unknown zone, and the steps
/// (send a group, wait for the next, done) at a time the tests choose.
@Suite(.tags(.pure), .runs(.pure))
struct LocalTimeScheduleTests {
    /// Milliseconds since 1970 of an RFC 3339 time.
    static func at(_ text: String) -> Int64 {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return Int64(formatter.date(from: text)!.timeIntervalSince1970 * 1000)
    }

    static func instant(_ time: String, _ zone: String, start: String) -> Int64 {
        LocalTimeSchedule.instant(
            of: LocalTime(time)!,
            in: LocalTimeSchedule.zone(zone)!,
            start: Self.at(start)
        )
    }

    @Test func aRowGoesAtTheLocalTimeOnTheFirstDayItHasNotPassedThere() {
        // 09:00 in Paris (UTC+2 in June) is 07:00Z: the same day from a start before it, the next day after it.
        #expect(Self.instant("09:00", "Europe/Paris", start: "2026-06-15T00:00:00Z") == Self.at("2026-06-15T07:00:00Z"))
        #expect(Self.instant("09:00", "Europe/Paris", start: "2026-06-15T07:01:00Z") == Self.at("2026-06-16T07:00:00Z"))
        // A start within that very minute: the minute has not ended, the row goes at once.
        #expect(
            Self.instant("09:00", "Europe/Paris", start: "2026-06-15T07:00:30Z") == Self.at("2026-06-15T07:00:00Z")
        )
        // Offsets of half and three quarters of an hour.
        #expect(Self.instant("09:00", "Asia/Kolkata", start: "2026-06-15T00:00:00Z") == Self.at("2026-06-15T03:30:00Z"))
        #expect(
            Self.instant("09:00", "Asia/Kathmandu", start: "2026-06-15T00:00:00Z") == Self.at("2026-06-15T03:15:00Z")
        )
        #expect(
            Self.instant("09:00", "Australia/Eucla", start: "2026-06-15T00:00:00Z") == Self.at("2026-06-15T00:15:00Z")
        )
    }

    @Test func acrossTheDateLineEachZoneGoesOnItsOwnDay() {
        // At 12:00Z on 15 June it is 02:00 on the 16th at Kiritimati (UTC+14) and 01:00 on the 15th at Pago Pago
        // (UTC-11): 09:00 there is 7 and 8 hours later, on different dates.
        let start = "2026-06-15T12:00:00Z"
        #expect(Self.instant("09:00", "Pacific/Kiritimati", start: start) == Self.at("2026-06-15T19:00:00Z"))
        #expect(Self.instant("09:00", "Pacific/Pago_Pago", start: start) == Self.at("2026-06-15T20:00:00Z"))
        // Every zone's instant is within the 26 hours after the start (and no earlier than its minute).
        let first = Self.at(start)
        for zone in TimeZone.knownTimeZoneIdentifiers {
            guard let known = LocalTimeSchedule.zone(zone) else { continue }
            let instant = LocalTimeSchedule.instant(of: LocalTime("09:00")!, in: known, start: first)
            #expect(instant > first - 60_000 && instant < first + 26 * 3_600_000, "\(zone)")
        }
    }

    @Test func aTimeInADaylightSavingGapGoesAtTheFirstMinuteAfterItAndATimeShownTwiceTheFirstTime() {
        // New York, 8 March 2026: 02:00 EST becomes 03:00 EDT; 02:30 does not exist, so 03:00 EDT (07:00Z).
        #expect(
            Self.instant("02:30", "America/New_York", start: "2026-03-08T00:00:00Z")
                == Self.at("2026-03-08T07:00:00Z")
        )
        // Paris, 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:00 and 02:59 go at 03:00 CEST (01:00Z).
        #expect(Self.instant("02:00", "Europe/Paris", start: "2026-03-28T12:00:00Z") == Self.at("2026-03-29T01:00:00Z"))
        #expect(Self.instant("02:59", "Europe/Paris", start: "2026-03-28T12:00:00Z") == Self.at("2026-03-29T01:00:00Z"))
        // The times around the gap are untouched.
        #expect(Self.instant("01:59", "Europe/Paris", start: "2026-03-28T12:00:00Z") == Self.at("2026-03-29T00:59:00Z"))
        #expect(Self.instant("03:00", "Europe/Paris", start: "2026-03-28T12:00:00Z") == Self.at("2026-03-29T01:00:00Z"))
        // New York, 1 November 2026: 01:30 happens in EDT (05:30Z) and again in EST (06:30Z): the first.
        #expect(
            Self.instant("01:30", "America/New_York", start: "2026-11-01T00:00:00Z")
                == Self.at("2026-11-01T05:30:00Z")
        )
    }

    @Test func anEmptyOrUnknownZoneGoesAtTheFallbackOrIsSkipped() {
        let start = Self.at("2026-06-15T00:00:00Z")
        let utc = LocalTimeSchedule(time: LocalTime("09:00")!, fallback: .zone("UTC"), start: start)
        #expect(utc.placement(zone: "Europe/Paris") == .zone(Self.at("2026-06-15T07:00:00Z")))
        #expect(utc.placement(zone: " Europe/Paris ") == .zone(Self.at("2026-06-15T07:00:00Z")))
        #expect(utc.placement(zone: "") == .fallback(Self.at("2026-06-15T09:00:00Z"), reason: "no time zone"))
        #expect(
            utc.placement(zone: "Mars/Olympus_Mons")
                == .fallback(Self.at("2026-06-15T09:00:00Z"), reason: "unknown time zone")
        )
        // Case matters, and abbreviations and offsets are not zone names.
        #expect(utc.placement(zone: "europe/paris").instant == Self.at("2026-06-15T09:00:00Z"))
        #expect(utc.placement(zone: "GMT+5").instant == Self.at("2026-06-15T09:00:00Z"))

        let tokyo = LocalTimeSchedule(time: LocalTime("09:00")!, fallback: .zone("Asia/Tokyo"), start: start)
        #expect(tokyo.placement(zone: "").instant == Self.at("2026-06-15T00:00:00Z"))
        let skip = LocalTimeSchedule(time: LocalTime("09:00")!, fallback: .skip, start: start)
        #expect(skip.placement(zone: "nowhere") == .fallback(nil, reason: "unknown time zone"))
        #expect(skip.placement(zone: "Asia/Tokyo").instant == Self.at("2026-06-15T00:00:00Z"))
    }

    @Test func aTimeIsHHMMAndAFallbackAKnownZoneOrSkip() {
        #expect(LocalTime("09:00") == LocalTime(hour: 9, minute: 0))
        #expect(LocalTime("23:59")?.description == "23:59" && LocalTime("00:00")?.description == "00:00")
        for bad in ["25:00", "24:00", "09:60", "9:00", "09:0", "09:00:00", "0900", "ab:cd", "", " 09:00", "-1:00"] {
            #expect(LocalTime(bad) == nil, "\(bad)")
        }
        #expect(LocalFallback("UTC") == .zone("UTC") && LocalFallback("skip") == .skip)
        #expect(LocalFallback("America/Argentina/Buenos_Aires") == .zone("America/Argentina/Buenos_Aires"))
        #expect(LocalFallback("Asia/Kolkata") == .zone("Asia/Kolkata") && LocalFallback("Etc/UTC") == .zone("Etc/UTC"))
        for bad in [
            "Nowhere/City", "utc", "Skip", "", "CEST", "CET", "PST", "GMT+1", "+02:00", "europe/paris", "Europe/",
        ] {
            #expect(LocalFallback(bad) == nil, "\(bad)")
        }
    }

    @Test func eachGroupIsSentOnceItsInstantHasComeInOrder() {
        typealias Group = LocalTimeSchedule.Group
        let groups = [Group(instant: 1000, rows: 3), Group(instant: 5000, rows: 2), Group(instant: 9000, rows: 4)]
        #expect(LocalTimeSchedule.next(groups: groups, sent: [], now: 999) == .wait(until: 1000))
        #expect(LocalTimeSchedule.next(groups: groups, sent: [], now: 1000) == .send(0))
        #expect(LocalTimeSchedule.next(groups: groups, sent: [0], now: 1000) == .wait(until: 5000))
        // Late (a restart, a pause): every group due goes at once, in order.
        #expect(LocalTimeSchedule.next(groups: groups, sent: [0], now: 10_000) == .send(1))
        #expect(LocalTimeSchedule.next(groups: groups, sent: [0, 1], now: 10_000) == .send(2))
        #expect(LocalTimeSchedule.next(groups: groups, sent: [0, 1, 2], now: 10_000) == .finished)
        #expect(LocalTimeSchedule.next(groups: [], sent: [], now: 0) == .finished)
        #expect(LocalTimeSchedule.waiting(groups: groups, sent: [0]) == (5000, 6))
        #expect(LocalTimeSchedule.waiting(groups: groups, sent: [0, 1, 2]) == (nil, 0))
    }
}
