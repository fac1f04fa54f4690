/// An output a job could not write whole (a full disk, an I/O error, a folder gone): which one, where, why, and what
/// it lacks. The report lists them (`JobReport.outputFailures`), the console names them, and the exit status is 3.
///
/// Outputs are written whole or not at all (`AtomicFileWriter`): a file that failed is not at its path, and neither
/// is an older file of that name, which would describe another run. A suppression file merged into
/// (`--unregistered`) is the exception: it keeps its earlier entries, without this run's.
public struct OutputFailure: Codable, Hashable, Sendable {
    /// Which output: "report", "rejects", "unsettled", "unregistered" or "write-back" (`path` names its destination).
    public var output: String
    public var path: String
    /// Why, as the system said it ("No space left on device").
    public var error: String
    /// The rows the file should have held and does not (the unsettled rows, the refused rows, the tokens to
    /// suppress); nil for the report.
    public var rowsMissing: Int?

    public init(output: String, path: String, error: String, rowsMissing: Int? = nil) {
        self.output = output
        self.path = path
        self.error = error
        self.rowsMissing = rowsMissing
    }

    /// One line for a person: `the unsettled file report.unsettled.csv is missing (3000 rows not listed): …`.
    public var summary: String {
        if self.output == Self.writeBack {
            let tokens = self.rowsMissing.map { " (\($0) tokens not recorded)" } ?? ""
            return "the write-back to \(self.path) failed\(tokens): \(self.error)"
        }
        let rows = self.rowsMissing.map { " (\($0) rows not listed)" } ?? ""
        let state = self.output == "unregistered" ? "was not updated" : "is missing"
        return "the \(self.output) file \(self.path) \(state)\(rows): \(self.error)"
    }
}
