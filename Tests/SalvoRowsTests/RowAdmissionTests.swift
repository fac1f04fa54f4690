import APNSWire
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// The row rules `validate()` and `take` share, one row at a time: rows read from a scratch file, no source.
@Suite(.tags(.pure), .runs(.pure)) struct RowAdmissionTests {
    /// What the rules make of each row of `files`, by file and line, and the summary they fill.
    static func admit(
        _ files: [String],
        options: TokenSource.Options = TokenSource.Options(),
        suppression: SuppressionList? = nil,
        payloads: RowPayloads? = nil
    ) throws -> (verdicts: [String], summary: TokenSource.Summary) {
        let admission = RowAdmission(
            files: files,
            partition: options.partition,
            dedupe: options.dedupe,
            suppression: suppression,
            payloads: payloads
        )
        var summary = TokenSource.Summary(validRows: 0, rejects: [])
        var seen: [DeviceToken: Int] = [:]
        var fields = RowFields()
        var verdicts: [String] = []
        for (fileIndex, file) in files.enumerated() {
            let reader = try RowReader(path: file, fileIndex: fileIndex, options: options)
            let columns = try payloads?.columns(in: file, header: reader.headerNames) ?? []
            while let row = try reader.next() {
                switch row {
                case .reject:
                    let reject = reader.lastReject!
                    admission.refuse(reject, summary: &summary)
                    verdicts.append("\(fileIndex):\(reject.line) bad")
                case .token(let row):
                    if let payloads { fields.removeAll(columnCount: payloads.templates.columns.count) }
                    let verdict = admission.admit(
                        row,
                        reader: reader,
                        fileIndex: fileIndex,
                        payloadColumns: columns,
                        seen: &seen,
                        summary: &summary,
                        fields: &fields
                    )
                    verdicts.append("\(fileIndex):\(row.line) \(verdict)")
                }
            }
        }
        return (verdicts, summary)
    }

    @Test func everyTokenRowIsAdmittedAndABadRowRefused() throws {
        let path = try temporaryFile("\(hex(1))\nnot-a-token\n\(hex(2))\n\(hex(1))\n")
        let (verdicts, summary) = try Self.admit([path])
        #expect(verdicts == ["0:1 admitted", "0:2 bad", "0:3 admitted", "0:4 admitted"])
        #expect(summary.validRows == 3)
        #expect(summary.rejects.map(\.line) == [2])
    }

    @Test func aRepeatedTokenIsADuplicateOfItsFirstLineInItsFile() throws {
        let first = try temporaryFile("\(hex(1))\n\(hex(2))\n\(hex(1))\n", name: "a.csv")
        let second = try temporaryFile("\(hex(2))\n", name: "b.csv")
        let (verdicts, summary) = try Self.admit([first, second], options: TokenSource.Options(dedupe: true))
        #expect(verdicts == ["0:1 admitted", "0:2 admitted", "0:3 setAside", "1:1 setAside"])
        #expect(summary.validRows == 2)
        #expect(
            summary.rejects.map(\.reason) == [
                "duplicate of the token on line 1 of \(first)", "duplicate of the token on line 2 of \(first)",
            ]
        )
        #expect(summary.rejects.map(\.file) == [first, second])
        let single = try temporaryFile("\(hex(3))\n\(hex(3))\n")
        let alone = try Self.admit([single], options: TokenSource.Options(dedupe: true))
        #expect(alone.summary.rejects.map(\.reason) == ["duplicate of the token on line 1"])
    }

    @Test func anotherPartitionsRowsAreCountedNotRefused() throws {
        let partition = try #require(Partition("1/2"))
        let bytes: [UInt8] = Array(1...8)
        let text = bytes.map { hex($0) }.joined(separator: "\n") + "\nbad\n"
        let path = try temporaryFile(text)
        let (verdicts, summary) = try Self.admit([path], options: TokenSource.Options(partition: partition))
        let owned = bytes.filter { partition.contains(token($0)) }
        #expect(!owned.isEmpty && owned.count < bytes.count)
        #expect(summary.validRows == owned.count)
        // Partition 0 owns the bad rows; this one counts them as another partition's.
        #expect(summary.otherPartitions == bytes.count - owned.count + 1)
        #expect(summary.rejects.isEmpty)
        #expect(verdicts.filter { $0.hasSuffix("otherPartition") }.count == bytes.count - owned.count)
        let owner = try #require(Partition("0/2"))
        let zero = try Self.admit([path], options: TokenSource.Options(partition: owner))
        #expect(zero.summary.rejects.map(\.line) == [9])
    }

    @Test func aListedTokenIsSuppressedUnlessItRegisteredAgain() throws {
        let path = try temporaryFile(
            """
            token,registered_at
            \(hex(1)),1000
            \(hex(2)),3000
            \(hex(3)),soon
            \(hex(4)),1000

            """
        )
        var list = SuppressionList()
        for byte: UInt8 in [1, 2, 3] {
            list.add(SuppressionList.Entry(token: token(byte), timestamp: 2000, reason: "Feedback"))
        }
        let (verdicts, summary) = try Self.admit(
            [path],
            options: TokenSource.Options(registeredAt: .name("registered_at")),
            suppression: list
        )
        #expect(verdicts == ["0:2 setAside", "0:3 admitted", "0:4 setAside", "0:5 admitted"])
        #expect(summary.suppressed == 1)
        #expect(summary.reregistered == 1)
        #expect(summary.rejects.map(\.value) == ["soon"])
        #expect(summary.validRows == 2)
    }

    @Test func aRowWhosePayloadCannotBeRenderedIsRefusedWithItsLine() throws {
        let path = try temporaryFile(
            """
            token,name
            \(hex(1)),Ann
            \(hex(2)),\(String(repeating: "x", count: 5000))

            """
        )
        let template = try PayloadTemplate(json: Array(#"{"aps":{"alert":"Hello {{name}}"}}"#.utf8), file: "t.json")
        let payloads = RowPayloads(templates: PayloadTemplates(template), limit: .http2)
        let (verdicts, summary) = try Self.admit([path], payloads: payloads)
        #expect(verdicts == ["0:2 admitted", "0:3 setAside"])
        #expect(summary.largestPayload == #"{"aps":{"alert":"Hello Ann"}}"#.utf8.count)
        #expect(summary.rejects.map(\.line) == [3])
        #expect(summary.rejects.first?.file == path)
        #expect(summary.validRows == 1)
    }
}
