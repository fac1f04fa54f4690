import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows
import SalvoSend

/// `salvo report merge R1.json R2.json …`: one report for a job sent as partitions.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Work with send reports.",
        subcommands: [Merge.self, MergeCSV.self]
    )

    struct Merge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "merge",
            abstract: "Merge the reports of every partition of a job (send --partition K/N) into one.",
            discussion: """
                Refuses reports of different jobs, naming what differs: other input files (paths, sizes), payloads \
                (SHA-256), options that change what is sent, partition counts; and a partition that is missing or \
                given twice (exit 3). A report written by a salvo that did not record the job's fingerprint cannot be \
                checked and is refused unless --force.
                """
        )

        @Argument(help: "The partitions' JSON reports.")
        var reports: [String]

        @Flag(
            help: "Merge reports that carry no job fingerprint (older builds): their payloads and options go unchecked."
        )
        var force = false

        @Option(help: "Write the merged report here (default: standard output).")
        var output: String?

        func run() async throws {
            try await exitingOnUserError {
                let decoder = JSONDecoder()
                var parsed: [JobReport] = []
                for path in self.reports {
                    do {
                        parsed.append(try decoder.decode(JobReport.self, from: Data(try readFile(path))))
                    } catch let error as UserError {
                        throw error
                    } catch {
                        throw UserError("\(path): not a send report: \(error)")
                    }
                }
                let merged: JobReport
                do {
                    merged = try ReportMerge.merge(parsed, force: self.force)
                } catch {
                    throw UserError("\(error)")
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data = try encoder.encode(merged)
                try writeOrPrint(data, to: self.output)
                FileHandle.standardError.write(Data((merged.summary + "\n").utf8))
                if !merged.isComplete { throw ExitCode(1) }
            }
        }
    }

    struct MergeCSV: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "merge-csv",
            abstract: "Join the rejects (or unregistered) CSV files of a job's partitions, in input order."
        )

        @Argument(help: "The partitions' CSV files (all with one header).")
        var files: [String]

        @Option(help: "Write the joined CSV here (default: standard output).")
        var output: String?

        @Option(parsing: .upToNextOption, help: "The job's token files, for the order of the rows.")
        var inputs: [String] = []

        func run() async throws {
            try await exitingOnUserError {
                var texts: [(name: String, text: String)] = []
                for path in self.files { texts.append((path, String(decoding: try readFile(path), as: UTF8.self))) }
                let joined: String
                do {
                    joined = try ReportMerge.mergeCSV(texts, inputFiles: self.inputs)
                } catch {
                    throw UserError("\(error)")
                }
                try writeOrPrint(Data(joined.utf8), to: self.output)
            }
        }
    }
}

/// Writes `data` to `path` atomically, or to standard output when there is no path.
private func writeOrPrint(_ data: Data, to path: String?) throws {
    guard let path else {
        FileHandle.standardOutput.write(data)
        return
    }
    do {
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    } catch {
        throw UserError("\(path): cannot write the file: \(error.localizedDescription)")
    }
}
