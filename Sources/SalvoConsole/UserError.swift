import APNSWire
import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A problem found while running (a file, a line, a value, a gateway that cannot be reached): printed as
/// `Error: <message>` with exit code 3, without the usage text that argument errors get.
public struct UserError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Runs a command's body; a `UserError` is printed as `Error: …` and ends the process with status 3 (the
/// job could not run), so scripts can tell it from refused rows (status 1) and bad arguments (status 64).
public func exitingOnUserError(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as UserError {
        printError(error.description)
        throw ExitCode(3)
    }
}

/// `Error: <message>` on standard error. The message is escaped (`TerminalText`, line breaks kept) wherever it came
/// from: it may quote a value of an input file, which must not act on the operator's terminal.
public func printError(_ message: String, prefix: String = "Error: ") {
    let text = TerminalText.escaped(message, keepingLineBreaks: true)
    FileHandle.standardError.write(Data((prefix + text + "\n").utf8))
}

/// The most memory the process has held resident so far, in bytes.
public func peakResidentBytes() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_maxrss * 1024
}
