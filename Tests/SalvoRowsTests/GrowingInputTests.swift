import Dispatch
import Foundation
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A file read while another thread of the process writes it (`GrowingInput`): the reader waits past the end of
/// what is written, and ends where the writer says, with the writer's failure, or when the writer goes quiet too long.
@Suite(.tags(.pure), .runs(.pure)) struct GrowingInputTests {
    /// A file named growing in its spools, and a writer that appends to it and says how far it is.
    final class Writer: @unchecked Sendable {
        let path: String
        let input: GrowingInput
        /// How a job's request names the file: growing, read while it is written.
        let spools: InputSpools
        private let handle: FileHandle
        private var bytes = 0

        init(stallLimit: Duration = .seconds(10)) throws {
            self.path = TestScratch.root.appendingPathComponent("growing-\(UUID().uuidString).csv").path
            _ = FileManager.default.createFile(atPath: self.path, contents: nil)
            self.handle = try FileHandle(forWritingTo: URL(fileURLWithPath: self.path))
            self.input = GrowingInput(writerName: "the test's rows", stallLimit: stallLimit)
            var spools = InputSpools()
            spools.read(self.path, from: InputSpools.Spool(path: self.path, growing: self.input))
            self.spools = spools
        }

        func append(_ text: String) throws {
            try self.handle.write(contentsOf: Data(text.utf8))
            self.bytes += text.utf8.count
            self.input.wrote(through: self.bytes)
        }
    }

    static func token(_ n: Int) -> String {
        let digits = String(n, radix: 16)
        return String(repeating: "0", count: 64 - digits.count) + digits
    }

    static func rows(_ range: ClosedRange<Int>) -> String {
        range.map { "\(Self.token($0)),\($0)\n" }.joined()
    }

    /// Reads every record on a thread of its own (a reader blocks while it waits), to the end or its error.
    static func readAll(
        _ path: String,
        spools: InputSpools = InputSpools()
    ) async -> (
        records: Int, error: InputError?
    ) {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var records = 0
                do throws(InputError) {
                    let reader = try CSVReader(path: path, spools: spools, chunkSize: 4096)
                    while try reader.next() != nil { records += 1 }
                    continuation.resume(returning: (records, nil))
                } catch {
                    continuation.resume(returning: (records, error))
                }
            }
        }
    }

    @Test func aReaderWaitsForRowsStillComingAndEndsWhereTheWriterEnds() async throws {
        let writer = try Writer()
        // A record cut in two by the writer's buffer: the reader must not take the first half for a whole record.
        try writer.append("token,n\n" + Self.rows(1...100) + String(Self.token(101).prefix(10)))
        let reading = Task { await Self.readAll(writer.path, spools: writer.spools) }
        for part in 0..<10 {
            try writer.append(part == 0 ? String(Self.token(101).dropFirst(10)) + ",101\n" : "")
            try writer.append(Self.rows((102 + part * 1000)...(101 + (part + 1) * 1000)))
        }
        writer.input.finish()
        let result = await reading.value
        #expect(result.error == nil)
        #expect(result.records == 1 + 101 + 10_000, "the header and every row once")
    }

    @Test func theWritersFailureEndsTheInputWithItsReason() async throws {
        let writer = try Writer()
        try writer.append("token,n\n" + Self.rows(1...50))
        let reading = Task { await Self.readAll(writer.path, spools: writer.spools) }
        try writer.append(Self.rows(51...60))
        writer.input.fail("the query failed: division by zero")
        let result = await reading.value
        #expect(result.records <= 61)
        #expect(result.error?.message == "the query failed: division by zero")
    }

    @Test func aWriterThatGoesQuietFailsTheInputAfterItsBound() async throws {
        let writer = try Writer(stallLimit: .milliseconds(300))
        try writer.append("token,n\n" + Self.rows(1...5))
        let start = ContinuousClock.now
        let result = await Self.readAll(writer.path, spools: writer.spools)
        #expect(result.records == 6)
        #expect(result.error?.message.contains("the test's rows stopped arriving") == true, "\(result.error as Any)")
        #expect(ContinuousClock.now - start >= .milliseconds(300))
    }

    @Test func aFileNotNamedGrowingEndsAtItsEnd() async throws {
        let path = TestScratch.root.appendingPathComponent("plain-\(UUID().uuidString).csv").path
        try Data(("token,n\n" + Self.rows(1...3)).utf8).write(to: URL(fileURLWithPath: path))
        let result = await Self.readAll(path)
        #expect(result.records == 4 && result.error == nil)
    }
}
