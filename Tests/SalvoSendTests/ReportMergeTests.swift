import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoTestTraits
import Testing

private func report(_ index: Int, of count: Int, delivered: Int = 10, rejected: Int = 1) -> JobReport {
    var report = JobReport()
    report.mode = "HTTP/2"
    report.gateway = "127.0.0.1:443"
    report.connections = 2
    report.partition = Partition(index: index, count: count)
    report.inputFiles = [InputFile(path: "tokens.csv", bytes: 6_600)]
    report.inputRows = 100
    report.validRows = delivered + rejected
    report.invalidInput = index == 0 ? 1 : 0
    report.confirmed = delivered
    report.rejected = ["BadDeviceToken": rejected]
    report.seconds = Double(index + 1)
    report.job = JobFingerprint(settings: ["protocol": "h2", "payload": String(repeating: "ab", count: 32)])
    return report
}

@Suite(.tags(.pure), .runs(.pure)) struct ReportMergeTests {
    @Test func mergesEveryPartitionIntoOneReport() throws {
        let merged = try ReportMerge.merge([report(2, of: 3), report(0, of: 3), report(1, of: 3)])
        #expect(merged.mergedPartitions == 3)
        #expect(merged.partition == nil)
        #expect(merged.confirmed == 30)
        #expect(merged.rejected == ["BadDeviceToken": 3])
        #expect(merged.validRows == 33)
        #expect(merged.invalidInput == 1)
        #expect(merged.inputRows == 100)
        #expect(merged.connections == 6)
        #expect(merged.seconds == 3, "the slowest worker")
        #expect(merged.notificationsPerSecond == 10)
    }

    @Test func refusesAMissingPartition() {
        let error = #expect(throws: JobError.self) { try ReportMerge.merge([report(0, of: 3), report(2, of: 3)]) }
        #expect(error?.message.contains("partition 1/3 missing") == true)
    }

    @Test func refusesAPartitionGivenTwice() {
        let error = #expect(throws: JobError.self) {
            try ReportMerge.merge([report(0, of: 2), report(1, of: 2), report(1, of: 2)])
        }
        #expect(error?.message.contains("partition 1/2 is given twice (reports 2 and 3)") == true)
    }

    @Test func refusesReportsOfAnotherInputOrPartitionCount() {
        var other = report(1, of: 2)
        other.inputFiles = [InputFile(path: "tokens.csv", bytes: 6_601)]
        let error = #expect(throws: JobError.self) { try ReportMerge.merge([report(0, of: 2), other]) }
        #expect(error?.message.contains("other input files") == true)
        #expect(throws: JobError.self) { try ReportMerge.merge([report(0, of: 2), report(1, of: 3)]) }
        var unpartitioned = report(0, of: 2)
        unpartitioned.partition = nil
        #expect(throws: JobError.self) { try ReportMerge.merge([unpartitioned]) }
    }

    @Test func joinsCSVFilesInInputOrder() throws {
        let header = RejectedRow.csvHeader
        let joined = try ReportMerge.mergeCSV(
            [
                ("p1.csv", "\(header)\nb.csv,3,t3,8,InvalidToken\na.csv,9,t9,8,InvalidToken\n"),
                ("p0.csv", "\(header)\n\"a,1.csv\",2,t2,8,InvalidToken\na.csv,4,t4,8,InvalidToken\n"),
            ],
            inputFiles: ["a.csv", "b.csv", "a,1.csv"]
        )
        #expect(
            joined == """
                \(header)
                a.csv,4,t4,8,InvalidToken
                a.csv,9,t9,8,InvalidToken
                b.csv,3,t3,8,InvalidToken
                "a,1.csv",2,t2,8,InvalidToken

                """
        )
        #expect(throws: JobError.self) { try ReportMerge.mergeCSV([("a", "x,y\n"), ("b", "x,z\n")], inputFiles: []) }
    }
}
