import APNSWire

/// A problem with the user's input that stops a job before anything is sent: a file that cannot be
/// read, or a CSV that cannot be parsed past some line. Names the file and line.
///
/// The description is escaped (`TerminalText`): the message may quote the file's own text, which must not act on
/// the terminal or the log it is shown in.
public struct InputError: Error, Hashable, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let message: String

    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return TerminalText.escaped("\(self.file): line \(line): \(self.message)") }
        return TerminalText.escaped("\(self.file): \(self.message)")
    }
}
