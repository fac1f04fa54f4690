import APNSWire
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoRows

@Suite(.tags(.pure), .runs(.pure)) struct UnsettledTailTests {
    private func row(_ index: Int) throws -> TokenRow {
        TokenRow(
            token: try DeviceToken(bytes: [UInt8](repeating: UInt8(index), count: 32)),
            line: index + 2,
            reference: RowReference(file: 0, offset: index * 65)
        )
    }

    @Test func spillsRowsInTheUnsettledFormatAcrossFlushes() throws {
        let path = TestScratch.root.appendingPathComponent("tail-\(UUID().uuidString).csv").path
        let tail = UnsettledTail(spillingTo: path)
        // More than a MiB of lines: several writes.
        let count = 20_000
        for index in 0..<count { tail.append(try self.row(index % 256), file: "a,b.csv") }
        tail.finish()
        #expect(tail.count == count && tail.failure == nil)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == count)
        let expected = UnsettledRow(
            token: try self.row(7).token.hexString,
            file: "a,b.csv",
            line: 9,
            outcome: .unsent
        )
        #expect(lines[7] == expected.csvLine, "the same line the listed rows get, the file name quoted")
        tail.remove()
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func withoutAFileRowsAreOnlyCounted() throws {
        let tail = UnsettledTail(spillingTo: nil)
        for index in 0..<5 { tail.append(try self.row(index), file: "t.csv") }
        tail.finish()
        #expect(tail.count == 5 && tail.path == nil && tail.failure == nil)
    }

    @Test func aSpillThatCannotBeWrittenSaysWhyAndStillCounts() throws {
        let tail = UnsettledTail(spillingTo: "/nonexistent-folder/tail.csv")
        tail.append(try self.row(1), file: "t.csv")
        tail.finish()
        #expect(tail.count == 1)
        #expect(tail.failure?.contains("/nonexistent-folder/tail.csv: cannot create") == true)
    }
}
