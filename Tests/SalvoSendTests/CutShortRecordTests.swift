import APNSWire
import Foundation
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSend

/// The record a second stop request's deadline writes without the job (`CutShortRecord`), in this process: what the
/// deadline does before the send is prepared, after the job returned or completed its own record, and the record
/// itself, headed by the first request's reason as `JobStop` kept it.
@Suite(.tags(.pure), .runs(.pure)) struct CutShortRecordTests {
    /// A prepared send of `rows` rows whose report goes to a scratch folder; nothing is sent.
    static func prepared(rows: Int = 10) async throws -> (send: BulkSend, report: String) {
        let (input, directory) = try SecondSignalRecordTests.journaledInput("salvo-cut-record", rows: rows)
        let folder = (directory as NSString).deletingLastPathComponent
        var request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(payload: Payload(json: #"{"aps":{}}"#))
        )
        request.outputs = SendOutputs(report: folder + "/report.json")
        return (try await BulkSend.prepare(request), folder + "/report.json")
    }

    @Test func theSecondRequestsRecordIsTheLastSnapshotHeadedByTheFirstRequestsReason() async throws {
        let (send, path) = try await Self.prepared()
        let stop = JobStop(grace: .seconds(2))
        let record = CutShortRecord(stop: stop)
        record.begin(send)
        #expect(record.hasBegun)
        var snapshot = JobProgress(validRows: 10, seconds: 1.5)
        snapshot.report.confirmed = 2
        record.progress(snapshot)
        stop.request(reason: "interrupted by SIGINT")
        stop.request(reason: "interrupted by SIGTERM")
        guard
            case .written(let report, let errors, let outputs) = record.deadlinePassed(
                second: "SIGTERM",
                after: .seconds(1)
            )
        else {
            Issue.record("the record is written")
            return
        }
        #expect(report.stopped == "interrupted by SIGINT, then SIGTERM: stopped at once")
        #expect(report.cutShort?.hasPrefix("the job had not returned 1.0 s after the second signal") == true)
        #expect(report.cutShort?.contains("(1.5 s into the job)") == true, "\(report.cutShort ?? "")")
        #expect(report.confirmed == 2 && report.validRows == 10 && report.notSent == 8)
        #expect(outputs.report == path)
        #expect(
            errors == [
                "SIGTERM: the job did not stop within 1.0 s; ended with the record of its last progress (in \(path))"
            ]
        )
        let written = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(written == report, "the file holds the record returned")
        #expect(try send.outputGate.pass {} == false, "the job's writing stays shut out")
    }

    @Test func withoutASnapshotTheRecordSaysNoneWasTaken() async throws {
        let (send, _) = try await Self.prepared(rows: 3)
        let stop = JobStop()
        let record = CutShortRecord(stop: stop)
        record.begin(send)
        stop.request(reason: "interrupted by SIGTERM")
        guard case .written(let report, _, _) = record.deadlinePassed(second: "SIGINT", after: .seconds(1)) else {
            Issue.record("the record is written")
            return
        }
        #expect(report.stopped == "interrupted by SIGTERM, then SIGINT: stopped at once")
        #expect(report.cutShort?.contains("(none taken)") == true)
        #expect(report.notSent == 3, "every valid row not sent")
    }

    @Test func beforeTheSendIsPreparedNothingIsWritten() {
        let stop = JobStop()
        let record = CutShortRecord(stop: stop)
        #expect(!record.hasBegun)
        stop.request(reason: "interrupted by SIGINT")
        stop.request(reason: "interrupted by SIGINT")
        guard case .notStarted(let message) = record.deadlinePassed(second: "SIGINT", after: .seconds(1)) else {
            Issue.record("nothing to write")
            return
        }
        #expect(message == "SIGINT: the job had not started; no report written")
    }

    @Test func aJobThatReturnedKeepsItsOwnRecord() async throws {
        let (send, path) = try await Self.prepared()
        let record = CutShortRecord(stop: JobStop())
        record.begin(send)
        record.jobReturned()
        guard case .jobReturned = record.deadlinePassed(second: "SIGTERM", after: .seconds(1)) else {
            Issue.record("the job's record stands")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: path), "no record written over the job's")
        #expect(try send.outputGate.pass {}, "the gate is left open")
    }

    @Test func aJobWhoseRecordIsWholeIsLeftToReturn() async throws {
        let (send, path) = try await Self.prepared()
        let record = CutShortRecord(stop: JobStop())
        record.begin(send)
        #expect(try send.outputGate.pass(completing: true) {})
        guard case .jobRecordWhole = record.deadlinePassed(second: "SIGTERM", after: .seconds(1)) else {
            Issue.record("the job's record is whole")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        record.jobReturned()
    }
}
