import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A program run in the background in a folder, as the tests run the real `salvo`: its standard output and error go
/// into one file, read when asked (never through a pipe a long run could fill), and the wait for its end is bounded.
public struct BackgroundRun: Sendable {
    public let process: Process
    public let file: URL

    /// What it printed so far, standard output and error together.
    public func output() -> String { (try? String(contentsOf: self.file, encoding: .utf8)) ?? "" }

    /// `salvo`, built next to the test bundle by `swift build`; nil when it is not there.
    public static var salvoPath: String? {
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = folder.appendingPathComponent("salvo").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        return nil
    }

    /// `salvoPath`, or nil with an issue recorded: a test that runs the executable cannot pass without it.
    public static var salvo: String? {
        guard let path = Self.salvoPath else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return nil
        }
        return path
    }

    /// Starts `executable` (the built `salvo`, or `/bin/sh` for a pipe) with `arguments` in `folder`, `environment`
    /// added to this process's; standard input is `standardInput` when given, else this process's.
    public static func start(
        _ executable: String,
        _ arguments: [String],
        in folder: URL,
        environment: [String: String] = [:],
        standardInput: FileHandle? = nil
    ) throws -> BackgroundRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.currentDirectoryURL = folder
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let file = folder.appendingPathComponent("output-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        process.standardOutput = handle
        process.standardError = handle
        if let standardInput { process.standardInput = standardInput }
        try process.run()
        return BackgroundRun(process: process, file: file)
    }

    /// Waits at most `seconds` for the run to end (then kills it, with an issue recorded); its exit status.
    public func wait(seconds: Int) async throws -> Int32 {
        try await Self.wait(self.process, seconds: seconds, output: self.output)
    }

    /// Waits at most `seconds` for `process` to end (then kills it, with an issue recorded and the end of `output`);
    /// its exit status.
    public static func wait(
        _ process: Process,
        seconds: Int,
        output: () -> String = { "" }
    ) async throws -> Int32 {
        let clock = ContinuousClock()
        let start = clock.now
        while process.isRunning && clock.now - start < .seconds(seconds) {
            try await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record("salvo did not finish within \(seconds) s:\n\(output().suffix(2000))")
        }
        return process.terminationStatus
    }
}
