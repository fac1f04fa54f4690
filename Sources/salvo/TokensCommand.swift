import APNSWire
import ArgumentParser
import Foundation

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

/// Distinct tokens from a seed: SplitMix64 over a counter, four words a token. SplitMix64 is a bijection of
/// the counter, so the first word alone never repeats within 2⁶⁴ tokens.
struct TokenGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed &* 0x9E37_79B9_7F4A_7C15
    }

    private mutating func word() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> DeviceToken {
        var words = (self.word(), self.word(), self.word(), self.word())
        return withUnsafeBytes(of: &words) { DeviceToken(unsafeBytes: $0) }
    }
}
