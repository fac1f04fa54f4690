import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A campaign in the fleet's chaos run: `rows` tokens of its own uploaded as a CSV to one worker (the next when one
/// does not answer), paced at `rate` for the fleet, run by every worker in partitions through the run's faults, and
/// followed on any worker that answers to `finished`. Checked against the ledgers and the campaign's report, with the
/// workers' `--on-uncertain resend`: every row delivered and confirmed, none left unsent; more than once no more
/// often than the report declares rows uncertain (rows a taker inherited from a holder's lease, and rows on a lost
/// connection); and of the partitions the stopped worker held, none of the rows another worker sent was sent again by
/// it once it woke.
struct FleetCampaign: FleetLoad {
    let rows: Int
    let rate: Int
    let tokens: [DeviceToken]
    let id = NIOLockedValueBox<String?>(nil)

    var name: String { "campaign" }

    init(rows: Int, rate: Int) {
        self.rows = rows
        self.rate = rate
        // Spread over all 32 bytes, and apart from the stream's tokens.
        self.tokens = (0..<rows).map {
            try! DeviceToken(bytes: Array(SHA256.hash(data: Array("chaos-campaign-\($0)".utf8))))
        }
    }

    func run(on fleet: Fleet) async throws {
        let tokens = self.tokens
        let body = await BlockingWork.run {
            var csv = "token\n"
            csv.reserveCapacity(tokens.count * 65 + 6)
            for token in tokens { csv += token.hexString + "\n" }
            return ByteBuffer(string: csv)
        }
        let settings = #"{"name":"chaos","payload":{"aps":{"alert":"c"}},"rate":\#(self.rate)}"#
        let made = try await fleet.create(
            "the campaign",
            path: "/v1/campaigns",
            body: body,
            headers: [("Content-Type", "text/csv"), ("Salvo-Campaign", settings)],
            field: "id",
            first: 0,
            patience: .seconds(120),
            every: .milliseconds(200),
            timeout: .seconds(60)
        )
        self.id.withLockedValue { $0 = made }
        var attempt = 0
        try await eventually("campaign \(made) is finished", timeout: .seconds(1200), every: .milliseconds(500)) {
            defer { attempt += 1 }
            guard let (status, answer) = await fleet.call(attempt, "/v1/campaigns/\(made)"), status == 200 else {
                return false
            }
            guard case .string(let state)? = try JSONValue.parse(Array(answer.readableBytesView)).value["state"]
            else { return false }
            if ["failed", "cancelled"].contains(state) {
                throw PostgresCluster.Failure("campaign \(made) is \(state): \(String(buffer: answer))")
            }
            return state == "finished"
        }
    }

    /// Made, running, and its first partitions delivered (a thirtieth of its rows).
    func isUnderWay(on fleet: Fleet) async -> Bool {
        guard let id = self.id.withLockedValue({ $0 }) else { return false }
        for index in fleet.workers.indices {
            guard let (status, answer) = await fleet.call(index, "/v1/campaigns/\(id)"), status == 200,
                let value = try? JSONValue.parse(Array(answer.readableBytesView)).value
            else { continue }
            guard value["state"] == .string("running"), case .number(let text)? = value["counts"]?["delivered"],
                let delivered = Int(text)
            else { return false }
            return delivered >= self.rows / 30
        }
        return false
    }

    func check(
        _ fleet: Fleet,
        ledger: FleetLedger,
        stall: Fleet.Stall?
    ) async throws -> (
        summary: String, issues: [String]
    ) {
        guard let id = self.id.withLockedValue({ $0 }) else { return ("never made", ["the campaign was never made"]) }
        var report: JobReport?
        var attempt = 0
        try await eventually("campaign \(id)'s report", timeout: .seconds(60), every: .milliseconds(200)) {
            defer { attempt += 1 }
            guard let (status, answer) = await fleet.call(attempt, "/v1/campaigns/\(id)/report"), status == 200 else {
                return false
            }
            report = try JSONDecoder().decode(JobReport.self, from: Data(answer.readableBytesView))
            return true
        }
        guard let report else { return ("no report", ["campaign \(id) has no report"]) }
        var issues: [String] = []
        let tokens = self.tokens
        let (once, twice, never) = await BlockingWork.run {
            var (once, twice, never) = (0, 0, 0)
            for token in tokens {
                switch ledger.total(token) {
                case 0: never += 1
                case 1: once += 1
                default: twice += 1
                }
            }
            return (once, twice, never)
        }
        let declared = report.uncertainEvents + (report.resumed?.inheritedUncertain ?? 0)
        if never > 0 { issues.append("\(never) rows never delivered") }
        if twice > declared { issues.append("\(twice) rows delivered more than once, \(declared) declared uncertain") }
        if report.validRows != self.rows || report.confirmed != self.rows || report.notSent != 0 {
            issues.append(
                "its report: \(report.validRows) valid, \(report.confirmed) confirmed, \(report.notSent) not sent"
            )
        }
        // The stopped worker's partitions: the rows another worker sent, none sent again by it once it woke.
        var taken = 0
        var sentAfterWaking: [String] = []
        if let stall {
            for token in stall.partitionRows where ledger.total(token, except: stall.worker) > 0 {
                taken += 1
                let key = token.hexString
                if stall.countsALeaseLater[key, default: 0] > stall.countsAtWake[key, default: 0] {
                    sentAfterWaking.append(key)
                }
            }
            if stall.partitionRows.isEmpty { issues.append("the stopped worker held no partition of the campaign") }
            if !sentAfterWaking.isEmpty {
                issues.append(
                    "the stopped worker sent \(sentAfterWaking.count) rows of partitions taken from it after it woke: "
                        + "\(sentAfterWaking.prefix(5))"
                )
            }
        }
        let summary =
            "\(self.rows) rows at \(self.rate)/s: \(once) delivered once, \(twice) more than once, \(never) never; "
            + "\(declared) declared uncertain (\(report.resumed?.inheritedUncertain ?? 0) inherited by takers); "
            + "the stopped worker held \(stall?.partitionRows.count ?? 0) rows in partitions, \(taken) of them sent by "
            + "others, \(sentAfterWaking.count) sent by it after it woke"
        return (summary, issues)
    }
}
