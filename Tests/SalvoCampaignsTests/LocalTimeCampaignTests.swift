import APNSWire
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import SalvoCampaigns
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The campaigns' wall clock as a test moves it (milliseconds since 1970): the runner reads `now` from it and waits
/// on it between a local-time campaign's groups, so a day of groups passes in no real time. `advance(to:)` ends every
/// wait that falls due.
final class ManualCampaignClock: Sendable {
    private struct State {
        var now: Int64
        var order = 0
        var sleepers: [Int: (due: Int64, continuation: CheckedContinuation<Void, Never>)] = [:]
    }

    private let state: NIOLockedValueBox<State>

    init(now: Int64) {
        self.state = NIOLockedValueBox(State(now: now))
    }

    var now: Int64 { self.state.withLockedValue { $0.now } }
    /// Waits not yet over.
    var sleepers: Int { self.state.withLockedValue { $0.sleepers.count } }
    /// When the earliest wait falls due.
    var nextDue: Int64? { self.state.withLockedValue { $0.sleepers.values.map(\.due).min() } }

    /// Returns once the clock reaches `time`, or at once when the task is cancelled.
    func wait(until time: Int64) async {
        let id = self.state.withLockedValue { state -> Int in
            state.order += 1
            return state.order
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = self.state.withLockedValue { state -> Bool in
                    guard time > state.now, !Task.isCancelled else { return true }
                    state.sleepers[id] = (time, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.state.withLockedValue { $0.sleepers.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Moves the clock to `time`, ending the waits due by then.
    func advance(to time: Int64) {
        let due = self.state.withLockedValue { state in
            state.now = max(state.now, time)
            let due = state.sleepers.filter { $0.value.due <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }
}

/// Local-time campaigns through the service's HTTP API against the simulator, with the campaigns' clock moved by the
/// test: rows in 30 zones (offsets of :30 and :45, either side of the date line) and a few without a known zone each
/// arrive when their zone's clocks show 09:00 (the fallback's for the others), once, across a restart of the service;
/// a pause while waiting sends nothing and a cancel counts the rest not sent; bad settings are refused naming the
/// field, with nothing kept.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(5)))
struct LocalTimeCampaignTests {
    static let zones = [
        "Pacific/Kiritimati", "Pacific/Tongatapu", "Pacific/Auckland", "Pacific/Chatham", "Australia/Sydney",
        "Australia/Adelaide", "Australia/Eucla", "Asia/Tokyo", "Asia/Shanghai", "Asia/Bangkok", "Asia/Yangon",
        "Asia/Dhaka", "Asia/Kathmandu", "Asia/Kolkata", "Asia/Karachi", "Asia/Kabul", "Asia/Dubai", "Asia/Tehran",
        "Europe/Moscow", "Europe/Paris", "Europe/London", "UTC", "Atlantic/Azores", "America/Noronha",
        "America/Sao_Paulo", "America/St_Johns", "America/New_York", "America/Denver", "Pacific/Marquesas",
        "Pacific/Pago_Pago",
    ]
    static let payload = #""payload":{"aps":{"alert":"good morning"}}"#
    /// 12:00Z on 15 June 2026: 09:00 at São Paulo (UTC-3) this very minute, at Kiritimati the next morning there.
    static let start: Int64 = 1_781_524_800_000

    /// Three rows per zone, one row with a bad token, two without a zone and two with an unknown one: the audience,
    /// and each row's zone by its token's index (nil: the fallback's).
    static func audience() -> (csv: String, zones: [Int: String?], badLine: Int, fallbackLines: [Int]) {
        var csv = "token,time_zone,name\n"
        var zones: [Int: String?] = [:]
        var index = 0
        var line = 1
        var fallbackLines: [Int] = []
        for zone in Self.zones {
            for _ in 0..<3 {
                csv += "\(campaignToken(index)),\(zone),person \(index)\n"
                zones[index] = zone
                index += 1
                line += 1
            }
        }
        csv += "not-a-token,Asia/Tokyo,nobody\n"
        line += 1
        let badLine = line
        for zone in ["", "", "Mars/Olympus_Mons", "europe/paris"] {
            csv += "\(campaignToken(index)),\(zone),person \(index)\n"
            zones[index] = .some(nil)
            index += 1
            line += 1
            fallbackLines.append(line)
        }
        return (csv, zones, badLine, fallbackLines)
    }

    /// Whether `instant` is 09:00 on the clocks of `zone`, and the first such minute that had not ended at `start`.
    static func isNineInTheMorning(_ instant: Int64, in zone: String, start: Int64) -> Bool {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        let date = Date(timeIntervalSince1970: Double(instant) / 1000)
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return parts.hour == 9 && parts.minute == 0 && instant + 60_000 > start
            && instant - 86_400_000 + 60_000 <= start
    }

    @Test func eachRowArrivesAtNineInItsZoneOnceAcrossARestart() async throws {
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-local")
        let clock = ManualCampaignClock(now: Self.start)
        var service = try await CampaignService.start(simulator: setup, folder: folder + "/store", clock: clock)
        let (csv, zones, badLine, fallbackLines) = Self.audience()
        let tokens = zones.keys.sorted().map { try! DeviceToken(hex: campaignToken($0)) }
        try await withCampaignClient { client in
            let made = try await service.upload(
                csv,
                settings: #"{"name":"morning","deliver_at_local":"09:00","local_fallback":"UTC",\#(Self.payload)}"#,
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)

            // The clock moves only from one wait of the runner's to the next: a row first seen in the ledger after a
            // move arrived at the clock's time then.
            var arrived: [Int: Int64] = [:]
            var moves = 0
            var restarted = false
            while true {
                try await eventually("the runner waits for its next group, or is done", timeout: .seconds(60)) {
                    if clock.sleepers > 0 { return true }
                    return try await service.campaign(id, client: client)["state"] != .string("running")
                }
                for (index, token) in tokens.enumerated() where arrived[index] == nil {
                    if (setup.simulator.ledger.record(for: token.bytes)?.count ?? 0) > 0 { arrived[index] = clock.now }
                }
                let status = try await service.campaign(id, client: client)
                if status["state"] != .string("running") {
                    #expect(status["state"] == .string("finished"), "\(status)")
                    break
                }
                let local = try #require(status["local_time"])
                let next = try #require(clock.nextDue)
                #expect(local["next_group_at"]?.stringValue == CampaignSettings.timeText(next), "\(local)")
                // Waiting: the rows of the groups not sent (the bad row is in Tokyo's group).
                let tokyoSent = arrived[Self.zones.firstIndex(of: "Asia/Tokyo")! * 3] != nil
                #expect(
                    local["rows_waiting"]?.intValue == zones.count + 1 - arrived.count - (tokyoSent ? 1 : 0),
                    "\(local)"
                )
                moves += 1
                if moves == 8 && !restarted {
                    // A restart between two groups: the next service resumes the campaign where its groups are.
                    restarted = true
                    let key = service.key
                    await service.stop()
                    service = try await CampaignService.start(
                        simulator: setup,
                        folder: folder + "/store",
                        key: key,
                        clock: clock
                    )
                    continue
                }
                clock.advance(to: next)
            }
            #expect(restarted && moves > 20, "\(moves) moves")

            // Every row once, each at 09:00 in its zone (UTC's for the fallback's), within its minute.
            for (index, zone) in zones {
                guard let at = arrived[index] else {
                    Issue.record("row \(index) (\(zone ?? "fallback")) never arrived")
                    continue
                }
                #expect(
                    Self.isNineInTheMorning(at, in: zone ?? "UTC", start: Self.start),
                    "row \(index) in \(zone ?? "fallback") arrived at \(CampaignSettings.timeText(at))"
                )
            }
            let verdict = setup.simulator.verdict(expected: ExpectedTokens(tokens))
            #expect(verdict.deliveredOnce == tokens.count && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")

            let finished = try await service.campaign(id, client: client)
            #expect(finished["counts"]?["delivered"]?.intValue == tokens.count, "\(finished)")
            #expect(finished["counts"]?["invalid_input"]?.intValue == 1, "\(finished)")
            #expect(finished["counts"]?["not_sent"]?.intValue == 0, "\(finished)")
            #expect(finished["local_time"]?["rows_waiting"]?.intValue == 0, "\(finished)")
            #expect(finished["local_time"]?["fallback_rows"]?.intValue == 4, "\(finished)")
            #expect(finished["local_time"]?["next_group_at"] == nil, "\(finished)")
            // The rows that used the fallback, with their lines; the bad row refused with the audience's line.
            let fallback = try await service.call(.GET, "/v1/campaigns/\(id)/fallback", client: client)
            let lines = fallback.text.split(separator: "\n").dropFirst().map { Int($0.prefix { $0 != "," }) ?? 0 }
            #expect(fallback.status == 200 && lines == fallbackLines, "\(fallback.text)")
            #expect(fallback.text.contains("Mars/Olympus_Mons,unknown time zone,UTC"), "\(fallback.text)")
            let rejects = try await service.call(.GET, "/v1/campaigns/\(id)/rejects", client: client)
            let rejected = rejects.text.split(separator: "\n")
            #expect(rejected.count == 2 && rejected[1].contains("audience.csv,\(badLine),"), "\(rejects.text)")
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    @Test func aPauseWhileWaitingSendsNothingAndACancelCountsTheRestNotSent() async throws {
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-local-pause")
        let clock = ManualCampaignClock(now: Self.start)
        let service = try await CampaignService.start(simulator: setup, folder: folder + "/store", clock: clock)
        let (csv, zones, _, _) = Self.audience()
        try await withCampaignClient { client in
            let made = try await service.upload(
                csv,
                settings: #"{"deliver_at_local":"09:00","local_fallback":"skip",\#(Self.payload)}"#,
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await eventually("the runner waits", timeout: .seconds(60)) { clock.sleepers > 0 }
            // São Paulo's three rows went at once; the rest wait.
            #expect(setup.simulator.ledger.snapshot().accepted == 3)
            let paused = try await service.call(.POST, "/v1/campaigns/\(id)/pause", client: client)
            #expect(paused.status == 200 && paused.json["state"] == .string("paused"), "\(paused.text)")
            #expect(clock.sleepers == 0)
            // Its time passes while paused: nothing goes.
            clock.advance(to: Self.start + 26 * 3_600_000)
            #expect(setup.simulator.ledger.snapshot().accepted == 3)
            let waiting = try await service.campaign(id, client: client)
            #expect(waiting["local_time"]?["skipped_rows"]?.intValue == 4, "\(waiting)")
            #expect(waiting["local_time"]?["rows_waiting"]?.intValue == zones.count - 4 + 1 - 3, "\(waiting)")

            let cancelled = try await service.call(.POST, "/v1/campaigns/\(id)/cancel", client: client)
            #expect(cancelled.status == 200, "\(cancelled.text)")
            try await service.waitFor(id, state: "cancelled", client: client)
            try await eventually("the closing run's report", timeout: .seconds(60)) {
                let report = try await service.call(.GET, "/v1/campaigns/\(id)/report", client: client)
                guard report.status == 200 else { return false }
                let decoded = try JSONDecoder().decode(JobReport.self, from: Data(report.body))
                return decoded.notSent == zones.count - 4 - 3
            }
            #expect(setup.simulator.ledger.snapshot().accepted == 3)
            let fallback = try await service.call(.GET, "/v1/campaigns/\(id)/fallback", client: client)
            #expect(
                fallback.text.split(separator: "\n").count == 5 && fallback.text.contains(",skip"),
                "\(fallback.text)"
            )
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    @Test func badLocalTimeSettingsAreRefusedNamingTheFieldAndLeaveNothing() async throws {
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-local-bad")
        let service = try await CampaignService.start(simulator: setup, folder: folder + "/store")
        let (csv, _, _, _) = Self.audience()
        try await withCampaignClient { client in
            for (settings, status, field) in [
                (#"{"deliver_at_local":"25:00",\#(Self.payload)}"#, 400, "deliver_at_local"),
                (#"{"deliver_at_local":"09:00","local_fallback":"Mars/Base",\#(Self.payload)}"#, 400, "local_fallback"),
                (#"{"deliver_at_local":"09:00","zone_column":"tz",\#(Self.payload)}"#, 422, "zone_column"),
            ] {
                let answer = try await service.upload(csv, settings: settings, client: client)
                #expect(answer.status == status && answer.field == field, "\(settings): \(answer.text)")
            }
            let list = try await service.call(.GET, "/v1/campaigns", client: client)
            #expect(list.json["campaigns"] == .array([]), "\(list.text)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: folder + "/store/campaigns")
        let incoming = try FileManager.default.contentsOfDirectory(atPath: folder + "/store/campaigns/incoming")
        #expect(left == ["incoming"] && incoming.isEmpty, "\(left) \(incoming)")
        await service.stop()
        try await setup.simulator.shutdown()
    }
}
