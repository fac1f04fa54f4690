import APNSWire
import Foundation
import NIOCore
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// What an HTTP/2 connection marks in the job's journal (`send --journal`): a row is written when its stream is
/// opened, confirmed at its 200, rejected with its reason, and stays written (uncertain) when the connection ends
/// without its answer.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2JournalMarksTests {
    @Test func streamsMarkTheirRowsWrittenThenSettled() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-h2j-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let journal = try RowJournal(
            statePath: folder.appendingPathComponent("rows.state").path,
            logPath: folder.appendingPathComponent("rejects.log").path,
            lineCounts: [5]
        )
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var machine = HTTP2ConnectionMachine(
            configuration: HTTP2ConnectionMachine.Configuration(
                maximumStreams: 100,
                requestTimeout: .seconds(10),
                pingInterval: .seconds(60),
                pingTimeout: .seconds(5),
                retry: HTTP2RetryPolicy(
                    initialDelay: .milliseconds(100),
                    maximumDelay: .seconds(5),
                    maximumAttempts: 3,
                    maximumRetryAfter: .seconds(60)
                ),
                recordDeliveries: false
            ),
            outcomes: RowOutcomes(onUncertain: .resend, files: ["tokens.csv"], journal: journal),
            firstStreamID: 1,
            random: SplitMix64(seed: 7),
            now: now
        )
        _ = machine.settingsReceived(maximumConcurrentStreams: 100, now: now)
        let first = try DeviceToken(bytes: [UInt8](repeating: 1, count: 32))
        _ = machine.writing([HTTP2WorkItem(row: TokenRow(token: first, line: 1))], bearer: nil, now: now)
        #expect(journal.states(file: 0) == [.none, .written, .none, .none, .none])
        _ = machine.headersReceived(streamID: 1, status: 200, apnsID: nil, retryAfter: nil, endStream: true, now: now)
        let items = (2...4).map { line in
            HTTP2WorkItem(
                row: TokenRow(token: try! DeviceToken(bytes: [UInt8](repeating: UInt8(line), count: 32)), line: line)
            )
        }
        _ = machine.writing(items, bearer: nil, now: now)
        #expect(journal.states(file: 0) == [.none, .confirmed, .written, .written, .written])
        _ = machine.headersReceived(streamID: 3, status: 200, apnsID: nil, retryAfter: nil, endStream: true, now: now)
        _ = machine.headersReceived(streamID: 5, status: 400, apnsID: nil, retryAfter: nil, endStream: false, now: now)
        _ = machine.dataReceived(
            streamID: 5,
            bytes: ByteBuffer(string: #"{"reason":"BadDeviceToken"}"#),
            endStream: true,
            now: now
        )
        _ = machine.closed(now: now)
        #expect(journal.states(file: 0) == [.none, .confirmed, .confirmed, .rejected, .written])
        let log = JournalRejectLog(
            text: try String(contentsOf: folder.appendingPathComponent("rejects.log"), encoding: .utf8)
        )
        #expect(log.record(file: 0, line: 3)?.reason == "BadDeviceToken")
        #expect(log.record(file: 0, line: 3)?.status == 400)
    }
}
