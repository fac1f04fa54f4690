import APNSWire
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SalvoCampaigns
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Campaigns through the service's HTTP API, in this process, against the simulator over TLS: an uploaded audience
/// paused and resumed delivers each row once and ends with the report `salvo send --journal` gives for the same
/// rows; a cancel leaves the rest `notSent`; a restart resumes a running campaign and keeps the others as they were;
/// bad input is refused naming the field, and nothing of a refused campaign stays.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(5)))
struct CampaignServiceTests {
    static let payload = #"{"payload":{"aps":{"alert":"hello"}}}"#

    @Test func aPausedAndResumedCampaignDeliversEachRowOnceAndReportsAsSendDoes() async throws {
        let rows = 3000
        var plan = FaultPlan()
        plan.uninstalled = [.init(topic: campaignTopic, tokens: (0..<rows).filter { $0 % 97 == 5 }.map(campaignToken))]
        let setup = try await CampaignSimulator.start(plan: plan)
        let folder = try campaignFolder("campaign-pause")
        let service = try await CampaignService.start(simulator: setup, folder: folder + "/store")
        let csv = audienceCSV(0..<rows, bad: 3)
        let campaignReport = try await withCampaignClient { client in
            let made = try await service.upload(
                csv,
                settings: #"{"name":"pause","rate":400,"# + Self.payload.dropFirst(),
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            #expect(made.json["started_now"] == .bool(true))
            let id = try #require(made.json["id"]?.stringValue)

            // Paused in the middle: the answer comes once the job has stopped, with the rest unsent.
            try await eventually("a third delivered", timeout: .seconds(60), every: .milliseconds(20)) {
                setup.simulator.ledger.snapshot().accepted >= rows / 3
            }
            let paused = try await service.call(.POST, "/v1/campaigns/\(id)/pause", client: client)
            #expect(paused.status == 200, "\(paused.text)")
            #expect(paused.json["state"] == .string("paused"))
            let atPause = setup.simulator.ledger.snapshot().accepted
            let notSent = paused.json["counts"]?["not_sent"]?.intValue ?? 0
            #expect(notSent > 0 && notSent < rows, "\(paused.text)")
            let report = try await service.call(.GET, "/v1/campaigns/\(id)/report", client: client)
            let pausedReport = try JSONDecoder().decode(JobReport.self, from: Data(report.body))
            #expect(pausedReport.notSent == notSent && pausedReport.stopped != nil)
            // Nothing goes while it is paused.
            let again = try await service.call(.GET, "/v1/campaigns/\(id)", client: client)
            #expect(again.json["state"] == .string("paused"))
            #expect(setup.simulator.ledger.snapshot().accepted == atPause)

            let resumed = try await service.call(.POST, "/v1/campaigns/\(id)/resume", client: client)
            #expect(resumed.status == 200 && resumed.json["state"] == .string("running"), "\(resumed.text)")
            try await service.waitFor(id, state: "finished", client: client)
            let finished = try await service.campaign(id, client: client)
            let counts = try #require(finished["counts"])
            let gone = (0..<rows).filter { $0 % 97 == 5 }.count
            #expect(counts["delivered"]?.intValue == rows - gone)
            #expect(counts["rejected"]?.intValue == gone)
            #expect(counts["invalid_input"]?.intValue == 3)
            #expect(counts["not_sent"]?.intValue == 0)

            // The ledger: every row once.
            let verdict = setup.simulator.verdict(
                expected: ExpectedTokens((0..<rows).map { try! DeviceToken(hex: campaignToken($0)) })
            )
            #expect(verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
            #expect(verdict.deliveredOnce == rows - gone, "\(verdict.summary)")

            // The report equals what `salvo send --journal` reports for the same rows.
            let campaignReport = try JSONDecoder().decode(
                JobReport.self,
                from: Data(try await service.call(.GET, "/v1/campaigns/\(id)/report", client: client).body)
            )
            #expect(campaignReport.resumed?.run == 2)
            let rejects = try await service.call(.GET, "/v1/campaigns/\(id)/rejects", client: client)
            #expect(
                rejects.status == 200 && rejects.text.split(separator: "\n").count == 1 + 3 + gone,
                "\(rejects.text.prefix(300))"
            )
            return campaignReport
        }
        await service.stop()
        try await setup.simulator.shutdown()

        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let other = try await CampaignSimulator.start(plan: plan)
        let sendFolder = try campaignFolder("campaign-send")
        try Data(csv.utf8).write(to: URL(fileURLWithPath: sendFolder + "/audience.csv"))
        try Data(#"{"aps":{"alert":"hello"}}"#.utf8).write(to: URL(fileURLWithPath: sendFolder + "/payload.json"))
        let (status, output) = try await TestProcess.run(
            salvo,
            [
                "send", sendFolder + "/audience.csv", "--protocol", "h2", "--payload", sendFolder + "/payload.json",
                "--journal", sendFolder + "/journal", "--report", sendFolder + "/report.json", "--quiet",
            ] + (try other.commandLineOptions(in: sendFolder)),
            input: .nothing
        )
        #expect(status == 1, "salvo send: refused rows make exit 1: \(output)")
        let sendReport = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: URL(fileURLWithPath: sendFolder + "/report.json"))
        )
        #expect(ReportCounts(campaignReport) == ReportCounts(sendReport))
        try await other.simulator.shutdown()
    }

    @Test func aCancelLeavesTheRowsNotSentNotSentAndCannotBeUndone() async throws {
        let rows = 2000
        let setup = try await CampaignSimulator.start()
        let service = try await CampaignService.start(simulator: setup, folder: try campaignFolder("campaign-cancel"))
        try await withCampaignClient { client in
            let made = try await service.upload(
                audienceCSV(0..<rows),
                settings: #"{"rate":400,"# + Self.payload.dropFirst(),
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await eventually("some delivered", timeout: .seconds(60), every: .milliseconds(20)) {
                setup.simulator.ledger.snapshot().accepted >= 200
            }
            // While it runs: its counts so far (never ahead of the ledger), its rate and when it should end.
            var running = JSONValue.null
            try await eventually("the running campaign's counts", timeout: .seconds(30)) {
                running = try await service.campaign(id, client: client)
                return (running["counts"]?["delivered"]?.intValue ?? 0) > 0
            }
            #expect(running["state"] == .string("running"))
            #expect((running["counts"]?["delivered"]?.intValue ?? 0) <= setup.simulator.ledger.snapshot().accepted)
            #expect(running["counts"]?["valid_rows"]?.intValue == rows, "\(running)")
            #expect(running["rate"]?.intValue != nil && running["estimated_end"]?.stringValue != nil, "\(running)")
            let cancelled = try await service.call(.POST, "/v1/campaigns/\(id)/cancel", client: client)
            #expect(cancelled.status == 200 && cancelled.json["state"] == .string("cancelled"), "\(cancelled.text)")
            let counts = try #require(cancelled.json["counts"])
            let delivered = try #require(counts["delivered"]?.intValue)
            let notSent = try #require(counts["not_sent"]?.intValue)
            #expect(
                notSent > 0 && delivered + notSent + (counts["uncertain"]?.intValue ?? 0) == rows,
                "\(cancelled.text)"
            )
            #expect(setup.simulator.ledger.snapshot().accepted == delivered)
            // The rows not sent are listed, as `send --unsettled` lists them.
            let unsettled = try await service.call(.GET, "/v1/campaigns/\(id)/unsettled", client: client)
            #expect(unsettled.status == 200)
            #expect(unsettled.text.split(separator: "\n").count - 1 == notSent + (counts["uncertain"]?.intValue ?? 0))
            // Final: a resume, a pause are refused; a cancel again changes nothing.
            let resume = try await service.call(.POST, "/v1/campaigns/\(id)/resume", client: client)
            #expect(resume.status == 409 && resume.field == "state", "\(resume.text)")
            #expect(
                resume.headers.contains { $0.0.lowercased() == "content-type" && $0.1 == "application/problem+json" }
            )
            #expect(try await service.call(.POST, "/v1/campaigns/\(id)/pause", client: client).status == 409)
            #expect(try await service.call(.POST, "/v1/campaigns/\(id)/cancel", client: client).status == 200)
            #expect(setup.simulator.ledger.snapshot().accepted == delivered)

            // A scheduled campaign cancelled before its time: every row `notSent`, none sent.
            let later = try await service.upload(
                audienceCSV(rows..<rows + 50),
                settings: #"{"send_at":"2099-01-01T00:00:00Z","# + Self.payload.dropFirst(),
                client: client
            )
            #expect(later.status == 201 && later.json["state"] == .string("scheduled"), "\(later.text)")
            let laterID = try #require(later.json["id"]?.stringValue)
            let closed = try await service.call(.POST, "/v1/campaigns/\(laterID)/cancel", client: client)
            #expect(closed.json["state"] == .string("cancelled"))
            try await eventually("the cancelled campaign's report", timeout: .seconds(30)) {
                try await service.call(.GET, "/v1/campaigns/\(laterID)/report", client: client).status == 200
            }
            let closedCounts = try await service.campaign(laterID, client: client)["counts"]
            #expect(closedCounts?["not_sent"]?.intValue == 50 && closedCounts?["delivered"]?.intValue == 0)
            #expect(setup.simulator.ledger.snapshot().accepted == delivered)
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    @Test func aRestartResumesTheRunningCampaignAndKeepsThePausedAndScheduledOnes() async throws {
        let rows = 1500
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-restart")
        var service = try await CampaignService.start(simulator: setup, folder: folder)
        try await withCampaignClient { client in
            let running = try await service.upload(
                audienceCSV(0..<rows),
                settings: #"{"rate":500,"# + Self.payload.dropFirst(),
                client: client
            )
            let id = try #require(running.json["id"]?.stringValue, "\(running.text)")
            let scheduled = try await service.upload(
                audienceCSV(rows..<rows + 10),
                settings: #"{"send_at":"2099-01-01T00:00:00Z","# + Self.payload.dropFirst(),
                client: client
            )
            let scheduledID = try #require(scheduled.json["id"]?.stringValue, "\(scheduled.text)")
            let paused = try await service.upload(
                audienceCSV(rows + 10..<rows + 20),
                settings: #"{"send_at":"2099-01-01T00:00:00Z","# + Self.payload.dropFirst(),
                client: client
            )
            let pausedID = try #require(paused.json["id"]?.stringValue)
            #expect(try await service.call(.POST, "/v1/campaigns/\(pausedID)/pause", client: client).status == 200)
            try await eventually("a fifth delivered", timeout: .seconds(60), every: .milliseconds(20)) {
                setup.simulator.ledger.snapshot().accepted >= rows / 5
            }
            await service.stop()
            let atStop = setup.simulator.ledger.snapshot().accepted
            #expect(atStop < rows)

            service = try await CampaignService.start(simulator: setup, folder: folder, key: service.key)
            #expect(try await service.campaign(scheduledID, client: client)["state"] == .string("scheduled"))
            #expect(try await service.campaign(pausedID, client: client)["state"] == .string("paused"))
            try await service.waitFor(id, state: "finished", client: client)
            let report = try JSONDecoder().decode(
                JobReport.self,
                from: Data(try await service.call(.GET, "/v1/campaigns/\(id)/report", client: client).body)
            )
            #expect(report.confirmed == rows && report.resumed?.run == 2, "\(report.summary)")
            let verdict = setup.simulator.verdict(
                expected: ExpectedTokens((0..<rows).map { try! DeviceToken(hex: campaignToken($0)) })
            )
            #expect(verdict.deliveredOnce == rows && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
            #expect(setup.simulator.ledger.snapshot().accepted == rows)
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }

    @Test func badInputIsRefusedNamingTheFieldAndLeavesNothing() async throws {
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-refusals")
        let allowed = folder + "/lists"
        try FileManager.default.createDirectory(atPath: allowed, withIntermediateDirectories: true)
        try Data(audienceCSV(0..<5).utf8).write(to: URL(fileURLWithPath: allowed + "/five.csv"))
        try Data(audienceCSV(0..<5).utf8).write(to: URL(fileURLWithPath: folder + "/outside.csv"))
        let service = try await CampaignService.start(
            simulator: setup,
            folder: folder + "/store",
            allowedFiles: allowed
        )
        try await withCampaignClient { client in
            _ = await service.service.putTemplate(
                name: "hello",
                body: Array(#"{"aps":{"alert":"Hi {{first_name}}"}}"#.utf8)
            )

            func json(_ body: String) async throws -> CampaignService.Answer {
                try await service.call(
                    .POST,
                    "/v1/campaigns",
                    contentType: "application/json",
                    body: Array(body.utf8),
                    client: client
                )
            }
            let file = #""audience":{"file":"five.csv"}"#
            let cases: [(answer: CampaignService.Answer, status: Int, field: String?)] = [
                (try await json(#"{"payload":{"aps":{}}}"#), 400, "audience"),
                (try await json(#"{\#(file),"payload":{"aps":{}},"send_at":"tomorrow"}"#), 400, "send_at"),
                (try await json(#"{\#(file),"payload":{"aps":{}},"send_at":"2026-12-01T09:00:00"}"#), 400, "send_at"),
                (try await json(#"{\#(file),"payload":{"aps":{}},"rate":0}"#), 400, "rate"),
                (try await json(#"{\#(file),"payload":{"aps":"no"}}"#), 400, "payload"),
                (try await json(#"{\#(file),"payload":[1]}"#), 400, "payload"),
                (try await json(#"{\#(file)}"#), 400, "payload"),
                (try await json(#"{\#(file),"payload":{"aps":{}},"template":"hello"}"#), 400, "template"),
                (try await json(#"{\#(file),"template":"nobody"}"#), 422, "template"),
                (try await json(#"{\#(file),"template":"hello"}"#), 422, "template"),
                (try await json(#"{"audience":{"file":"../outside.csv"},"payload":{"aps":{}}}"#), 422, "audience.file"),
                (
                    try await json(#"{"audience":{"file":"\#(folder)/outside.csv"},"payload":{"aps":{}}}"#), 422,
                    "audience.file"
                ),
                (try await json(#"{"audience":{"file":"missing.csv"},"payload":{"aps":{}}}"#), 422, "audience.file"),
                (try await json(#"{not json"#), 400, nil),
                (try await service.upload("", settings: Self.payload, client: client), 422, "audience"),
                (
                    try await service.upload("token\nnot-a-token\n", settings: Self.payload, client: client), 422,
                    "audience"
                ),
                (
                    try await service.upload(audienceCSV(0..<5), settings: #"{"template":"hello"}"#, client: client),
                    422,
                    "template"
                ),
                (try await service.upload(audienceCSV(0..<5), settings: "{", client: client), 400, nil),
                (
                    try await service.call(
                        .POST,
                        "/v1/campaigns",
                        contentType: "text/csv",
                        body: Array(audienceCSV(0..<5).utf8),
                        client: client
                    ),
                    400, "Salvo-Campaign"
                ),
            ]
            for (index, item) in cases.enumerated() {
                #expect(item.answer.status == item.status, "case \(index): \(item.answer.text)")
                #expect(item.answer.field == item.field, "case \(index): \(item.answer.text)")
                #expect(item.answer.json["type"]?.stringValue?.hasPrefix("https://salvo.dev/problems/") == true)
            }

            // An upload that stops midway: its connection closed after part of its Content-Length.
            let host = URL(string: service.base)!
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: host.port!).get()
            let body = audienceCSV(0..<200)
            let head =
                "POST /v1/campaigns HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(service.key)\r\n"
                + "Content-Type: text/csv\r\nSalvo-Campaign: \(Self.payload)\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            try await channel.writeAndFlush(ByteBuffer(string: head + String(body.prefix(body.count / 2)))).get()
            try await channel.close().get()
            // Nothing of it stays: no campaign, no file in the store's folder for uploads.
            try await eventually("the cut upload is gone", timeout: .seconds(20)) {
                (try? FileManager.default.contentsOfDirectory(atPath: folder + "/store/campaigns/incoming"))?.isEmpty
                    ?? false
            }
            let list = try await service.call(.GET, "/v1/campaigns", client: client)
            #expect(list.json["campaigns"] == .array([]), "\(list.text)")
            let folders = try FileManager.default.contentsOfDirectory(atPath: folder + "/store/campaigns")
            #expect(folders == ["incoming"], "\(folders)")
            #expect(setup.simulator.ledger.snapshot().accepted == 0)

            // The same file, allowed, with the template's field in its header, and a start in the past: it starts now.
            try Data(("token,first_name\n" + (0..<5).map { "\(campaignToken($0)),P\($0)\n" }.joined()).utf8).write(
                to: URL(fileURLWithPath: allowed + "/named.csv")
            )
            let made = try await json(
                #"{"audience":{"file":"named.csv"},"template":"hello","send_at":"2020-01-01T00:00:00Z"}"#
            )
            #expect(made.status == 201 && made.json["started_now"] == .bool(true), "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await service.waitFor(id, state: "finished", client: client)
            #expect(try await service.call(.GET, "/v1/campaigns/\(UUID().uuidString)", client: client).status == 404)
            #expect(try await service.call(.GET, "/v1/campaigns/nope", client: client).status == 400)
            #expect(setup.simulator.ledger.snapshot().accepted == 5)
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }
}
