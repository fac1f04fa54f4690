import AsyncHTTPClient
import Foundation
import SalvoServer
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Debian's headless Chromium, when installed (CI installs it).
private let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

/// The console in a real browser: a service in this process on the simulator, transactional notifications (some to
/// gone tokens) and a paced campaign whose name is markup; Chromium, let in through one-time links, loads the pages;
/// the campaign's progress advances from one load to the next, and once it is paused the page's counts equal what
/// `GET /v1/campaigns/{id}` answers right after. A screenshot of the overview is taken (`SALVO_CONSOLE_SCREENSHOT`
/// names a file to copy it to: `docs/console.png` is made so).
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(5)))
struct ConsoleBrowserTests {
    static let name = "<script>alert(1)</script> spring news"

    @Test(.enabled(if: chromium != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func theConsoleFollowsARunningCampaignAndAgreesWithTheAPI() async throws {
        let browser = try #require(chromium, "CI installs Debian's chromium")
        let rows = 3000
        let goneInCampaign = (0..<rows).filter { $0 % 50 == 7 }
        let transactional = 10_000..<10_040
        let goneTransactional = transactional.filter { $0 % 10 == 3 }
        var plan = FaultPlan()
        plan.uninstalled = [
            .init(topic: campaignTopic, tokens: (goneInCampaign + goneTransactional).map(campaignToken))
        ]
        let setup = try await CampaignSimulator.start(plan: plan)
        let folder = try campaignFolder("console-browser")
        let service = try await CampaignService.start(simulator: setup, folder: folder + "/store", console: true)
        let scratch = URL(fileURLWithPath: folder)
        try await withCampaignClient { client in
            // Transactional traffic, all final before the campaign starts.
            let items = transactional.map { #"{"token":"\#(campaignToken($0))","payload":{"aps":{"alert":"hi"}}}"# }
            let posted = try await service.call(
                .POST,
                "/v1/notifications",
                contentType: "application/json",
                body: Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8),
                client: client
            )
            #expect(posted.status == 202, "\(posted.text)")
            let batch = try #require(posted.json["batch"]?.stringValue)
            let final = try await service.call(.GET, "/v1/batches/\(batch)?wait=30", client: client)
            #expect(final.json["final"] == .bool(true), "\(final.text)")

            // A campaign paced to run for about 30 seconds.
            let settings = #"{"name":"\#(Self.name)","rate":100,"payload":{"aps":{"alert":"news"}}}"#
            let made = try await service.upload(audienceCSV(0..<rows), settings: settings, client: client)
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            let page = "/console/campaigns/\(id)"
            try await eventually("the campaign delivers", timeout: .seconds(60)) {
                try await service.campaign(id, client: client)["counts"]?["delivered"]?.intValue ?? 0 > 0
            }

            // Its progress advances from one load of its page to the next.
            let first = try await self.dump(page, service: service, browser: browser, in: scratch, client: client)
            let settled = try #require(Self.number(in: first, after: "data-settled=\""), "\(first.prefix(600))")
            #expect(first.contains("data-series=\"settled\""))
            try await eventually("the page shows progress", timeout: .seconds(60), every: .seconds(1)) {
                let again = try await self.dump(page, service: service, browser: browser, in: scratch, client: client)
                return Self.number(in: again, after: "data-settled=\"") ?? 0 > settled
            }

            // The overview: the transactional counts and refusals, the campaign's row with its name as text.
            let overview = try await self.dump("/", service: service, browser: browser, in: scratch, client: client)
            let gone = goneTransactional.count
            #expect(Self.number(in: overview, after: "id=\"accepted\" data-value=\"") == transactional.count)
            #expect(Self.number(in: overview, after: "id=\"delivered\" data-value=\"") == transactional.count - gone)
            #expect(Self.number(in: overview, after: "id=\"refused\" data-value=\"") == gone)
            let reason = "<td>Unregistered</td><td class=\"number\">410</td><td class=\"number\" data-value=\""
            #expect(Self.number(in: overview, after: reason) == gone, "\(overview.prefix(3000))")
            #expect(overview.contains("data-campaign=\"\(id)\""))
            #expect(overview.contains("&lt;script&gt;alert(1)&lt;/script&gt; spring news"))
            #expect(!overview.contains("<script"), "the name is text, and the console has no script")
            #expect(Self.number(in: overview, after: "id=\"latency-p50\" data-value=\"") != nil)

            // A screenshot of the overview while the campaign runs.
            let screenshot = scratch.appendingPathComponent("console.png")
            try await self.screenshot("/", to: screenshot, service: service, browser: browser, client: client)
            let png = try Data(contentsOf: screenshot)
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
            #expect(png.count > 10_000 && png.count < 200_000, "\(png.count) bytes")
            if let copy = ProcessInfo.processInfo.environment["SALVO_CONSOLE_SCREENSHOT"] {
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(at: screenshot, to: URL(fileURLWithPath: copy))
            }

            // Paused, the page's counts are the API's, read right after.
            let paused = try await service.call(.POST, "/v1/campaigns/\(id)/pause", client: client)
            #expect(paused.status == 200, "\(paused.text)")
            let shown = try await self.dump(page, service: service, browser: browser, in: scratch, client: client)
            let answer = try await service.campaign(id, client: client)
            #expect(shown.contains("<dd id=\"state\">paused</dd>") && answer["state"] == .string("paused"))
            for key in ["valid_rows", "delivered", "confirmed", "rejected", "not_sent", "uncertain", "expired"] {
                let onPage = Self.number(in: shown, after: "class=\"number \(key)\" data-value=\"")
                #expect(onPage != nil && onPage == answer["counts"]?[key]?.intValue, "\(key)")
            }
            let delivered = answer["counts"]?["delivered"]?.intValue ?? 0
            #expect(delivered > 0 && delivered < rows, "paused in the middle: \(delivered)")
            let refused = answer["counts"]?["rejected_by_reason"]?["Unregistered"]?.intValue
            #expect(Self.number(in: shown, after: "<td>Unregistered</td><td class=\"number\" data-value=\"") == refused)

            _ = try await service.call(.POST, "/v1/campaigns/\(id)/cancel", client: client)
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    /// A one-time link to `path`, as a test obtains it with the API key (`POST /console/sessions`).
    private func link(_ path: String, service: CampaignService, client: HTTPClient) async throws -> String {
        let answer = try await service.call(.POST, "/console/sessions?then=\(path)", client: client)
        #expect(answer.status == 201, "\(answer.text)")
        return service.base + (try #require(answer.json["url"]?.stringValue))
    }

    /// The page at `path` as the browser's DOM (`--dump-dom`), entered through a fresh one-time link in a fresh
    /// profile. Bounded: a browser still running after 60 s is killed, and the test fails.
    private func dump(
        _ path: String,
        service: CampaignService,
        browser: String,
        in folder: URL,
        client: HTTPClient
    ) async throws -> String {
        let url = try await self.link(path, service: service, client: client)
        let (_, dom) = try await TestProcess.run(
            browser,
            Self.options(profile: folder.appendingPathComponent("profile-\(UUID().uuidString)")) + ["--dump-dom", url],
            output: .standardOutputOnly,
            seconds: 60
        )
        return dom
    }

    private func screenshot(
        _ path: String,
        to file: URL,
        service: CampaignService,
        browser: String,
        client: HTTPClient
    ) async throws {
        let url = try await self.link(path, service: service, client: client)
        _ = try await TestProcess.run(
            browser,
            Self.options(profile: file.deletingLastPathComponent().appendingPathComponent("profile-shot"))
                + ["--window-size=1280,900", "--hide-scrollbars", "--screenshot=\(file.path)", url],
            output: .nothing,
            seconds: 60
        )
    }

    private static func options(profile: URL) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)", "--no-first-run"]
    }

    /// The whole number written right after the first `marker` in `text`.
    static func number(in text: String, after marker: String) -> Int? {
        guard let range = text.range(of: marker) else { return nil }
        return Int(String(text[range.upperBound...].prefix { $0.isNumber }))
    }
}
