import APNSWire
import ArgumentParser
import Foundation
import SalvoEngine

/// `salvo tokens generate N`: sample token files for demos, tests and benchmarks.
struct TokensCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Work with device-token files.",
        subcommands: [Generate.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write N distinct pseudo-random device tokens as CSV (header `token`), repeatably from a seed."
        )

        @Argument(help: "How many tokens.")
        var count: Int

        @Option(help: "The seed: the same seed gives the same tokens.")
        var seed: UInt64 = 1

        @Option(name: .shortAndLong, help: "The output file (default: standard output).")
        var output: String?

        func validate() throws {
            guard self.count >= 0 else { throw ValidationError("the count must not be negative (got \(self.count))") }
        }

        func run() throws {
            let sink: FileHandle
            if let output = self.output {
                guard FileManager.default.createFile(atPath: output, contents: nil) else {
                    throw UserError("\(output): cannot create the file")
                }
                sink = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
            } else {
                sink = FileHandle.standardOutput
            }
            var generator = TokenGenerator(seed: self.seed)
            var chunk = "token\n"
            for _ in 0..<self.count {
                chunk += generator.next().hexString
                chunk += "\n"
                if chunk.utf8.count >= 1 << 20 {
                    sink.write(Data(chunk.utf8))
                    chunk = ""
                }
            }
            sink.write(Data(chunk.utf8))
            if self.output != nil { try sink.close() }
        }
    }
}
