/// A place in a job's input before which every row is done with: settled in the journal (confirmed, presumed,
/// rejected, expired), or never to be sent (a bad row, another partition's, a suppressed one). A journaled job
/// records the furthest such place with its periodic sync, and a run that resumes the job starts reading there
/// instead of reading through every settled row first (`TokenSource.resume(at:)`).
///
/// A place is the start of a record: its file, byte offset and line, so that reading on from it gives every later
/// row the same line (the journal's key) as reading from the top does; and the counts before it, for estimates.
public struct InputCheckpoint: Codable, Hashable, Sendable {
    /// The input file the next record is in (the file count: past the last file).
    public var file: Int
    /// The byte offset of that record in its file; 0 for the start of the file (its header is read as usual).
    public var offset: Int
    /// The line that record starts on (0 with offset 0).
    public var line: Int
    /// Rows before it, of every kind, in every file.
    public var rows: Int
    /// Valid rows before it.
    public var validRows: Int
    /// Rows before it are held as written and not settled (uncertain rows a run that reports them left): a run that
    /// sends uncertain rows again must read them, so it does not start here.
    public var passesUncertain: Bool

    public init(file: Int, offset: Int, line: Int, rows: Int, validRows: Int, passesUncertain: Bool) {
        self.file = file
        self.offset = offset
        self.line = line
        self.rows = rows
        self.validRows = validRows
        self.passesUncertain = passesUncertain
    }

    /// The top of the input.
    public static let start = InputCheckpoint(
        file: 0,
        offset: 0,
        line: 0,
        rows: 0,
        validRows: 0,
        passesUncertain: false
    )
}
