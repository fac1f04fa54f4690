import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

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
            do {
                try self.write()
            } catch let error as UserError {
                // Exit 3 like every command that could not do its job (a full disk, a folder that is missing).
                FileHandle.standardError.write(Data("Error: \(error.description)\n".utf8))
                throw ExitCode(3)
            }
        }

        private func write() throws {
            let name = self.output ?? "standard output"
            let sink: FileHandle
            if let output = self.output {
                // open(2), not FileManager.createFile: that replaces the path by a new file, a device (/dev/stdout,
                // a named pipe) included.
                let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard descriptor >= 0 else {
                    throw UserError("\(output): cannot create the file: \(String(cString: strerror(errno)))")
                }
                sink = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            } else {
                sink = FileHandle.standardOutput
            }
            // `write(contentsOf:)` throws where `write(_:)` would trap (a full disk, a closed pipe).
            func emit(_ text: String) throws {
                do {
                    try sink.write(contentsOf: Data(text.utf8))
                } catch {
                    throw UserError("\(name): cannot write: \(error.localizedDescription)")
                }
            }
            var generator = TokenGenerator(seed: self.seed)
            var chunk = "token\n"
            for _ in 0..<self.count {
                chunk += generator.next().hexString
                chunk += "\n"
                if chunk.utf8.count >= 1 << 20 {
                    try emit(chunk)
                    chunk = ""
                }
            }
            try emit(chunk)
            if self.output != nil {
                do {
                    try sink.close()
                } catch {
                    throw UserError("\(name): cannot close the file: \(error.localizedDescription)")
                }
            }
        }
    }
}
