import APNSWire
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo serve` as its users run it, with a campaign uploaded through its API: the process `kill -9`ed in the
/// middle and started again on the same store resumes the campaign by itself; a pause and a resume follow; the
/// simulator's ledger then holds every row, each once but for the rows the kill left written and unanswered (resent:
/// at least once), which the resumed run's report counts.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(5)))
struct CampaignKillTests {
    @Test func aCampaignKilledMidwayIsResumedByTheNextStartAndEveryRowArrives() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let rows = 6000
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-kill")
        let store = folder + "/store"
        let (created, createdOutput) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", store, "--name", "kill"],
            input: .nothing
        )
        #expect(created == 0, "\(createdOutput)")
        let key = try #require(
            createdOutput.split(separator: "\n").first { $0.hasPrefix("key: ") }.map { String($0.dropFirst(5)) }
        )
        let free = try ClosedPort()
        let port = free.port
        free.close()
        let arguments =
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--store", store, "--log-level", "warning",
                "--shutdown-grace", "2",
            ]
            + (try setup.commandLineOptions(in: folder))
        var server = try TestProcess(salvo, arguments, input: .nothing, output: .together)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let base = "http://127.0.0.1:\(port)"

        func call(_ method: HTTPMethod, _ path: String, csv: String? = nil) async throws -> (Int, JSONValue, [UInt8]) {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
            if let csv {
                request.headers.add(name: "Content-Type", value: "text/csv")
                request.headers.add(name: "Salvo-Campaign", value: #"{"rate":1500,"payload":{"aps":{"alert":"k"}}}"#)
                request.body = .bytes(ByteBuffer(string: csv))
            }
            let response = try await client.execute(request, timeout: .seconds(30))
            let bytes = Array(try await response.body.collect(upTo: 16 << 20).readableBytesView)
            return (Int(response.status.code), (try? JSONValue.parse(bytes).value) ?? .null, bytes)
        }
        func up() async throws {
            try await eventually("the service answers", timeout: .seconds(60)) {
                (try? await call(.GET, "/v1/campaigns"))?.0 == 200
            }
        }

        do {
            try await up()
            let (status, made, _) = try await call(.POST, "/v1/campaigns", csv: audienceCSV(0..<rows))
            #expect(status == 201, "\(made)")
            let id = try #require(made["id"]?.stringValue)
            try await eventually("a third delivered", timeout: .seconds(60), every: .milliseconds(5)) {
                setup.simulator.ledger.snapshot().accepted >= rows / 3
            }
            try await server.kill()
            let atKill = setup.simulator.ledger.snapshot().accepted
            #expect(atKill < rows)

            server = try TestProcess(salvo, arguments, input: .nothing, output: .together)
            try await up()
            try await eventually("two thirds delivered", timeout: .seconds(60), every: .milliseconds(5)) {
                setup.simulator.ledger.snapshot().accepted >= 2 * rows / 3
            }
            let (pausedStatus, paused, _) = try await call(.POST, "/v1/campaigns/\(id)/pause")
            #expect(pausedStatus == 200 && paused["state"] == .string("paused"), "\(paused)")
            let (_, _, reportBytes) = try await call(.GET, "/v1/campaigns/\(id)/report")
            let afterKill = try JSONDecoder().decode(JobReport.self, from: Data(reportBytes))
            #expect(afterKill.resumed?.run == 2, "\(afterKill.summary)")
            let inherited = afterKill.resumed?.inheritedUncertain ?? 0

            let (resumedStatus, _, _) = try await call(.POST, "/v1/campaigns/\(id)/resume")
            #expect(resumedStatus == 200)
            try await eventually("the campaign finished", timeout: .seconds(120)) {
                (try? await call(.GET, "/v1/campaigns/\(id)"))?.1["state"] == .string("finished")
            }
            let (_, _, finalBytes) = try await call(.GET, "/v1/campaigns/\(id)/report")
            let final = try JSONDecoder().decode(JobReport.self, from: Data(finalBytes))
            #expect(final.confirmed == rows && final.notSent == 0 && final.resumed?.run == 3, "\(final.summary)")
            let verdict = setup.simulator.verdict(
                expected: ExpectedTokens((0..<rows).map { try! DeviceToken(hex: campaignToken($0)) }),
                listLimit: rows
            )
            #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
            #expect(verdict.deliveredOnce + verdict.deliveredMoreThanOnce == rows)
            // Twice only what the kill left written and unanswered (sent again: at least once).
            #expect(verdict.deliveredMoreThanOnce <= inherited, "\(verdict.summary); inherited uncertain \(inherited)")
            print(
                "campaign kill test: \(verdict.deliveredOnce) delivered once, \(verdict.deliveredMoreThanOnce) twice, "
                    + "\(inherited) left uncertain by the kill"
            )
        } catch {
            Issue.record("\(error)\n\(server.output.suffix(2000))")
        }
        server.signal(SIGTERM)
        #expect(try await server.wait(seconds: 30) == 0, "\(server.output.suffix(2000))")
        try await client.shutdown()
        try await setup.simulator.shutdown()
    }
}
