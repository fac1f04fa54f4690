/// The journal's append-only log of refused rows: one tab-separated line per refusal, `file`, `line`, `status`,
/// `reason`, `token` (file is the input file's index). A pure value over the log's text; `RowJournal` appends.
public struct JournalRejectLog: Sendable {
    public struct Record: Hashable, Sendable {
        public var file: Int
        public var line: Int
        public var status: Int
        public var reason: String
        public var token: String

        public init(file: Int, line: Int, status: Int, reason: String, token: String) {
            self.file = file
            self.line = line
            self.status = status
            self.reason = reason
            self.token = token
        }

        /// The record as the log writes it (with its line break).
        public var logLine: String { "\(self.file)\t\(self.line)\t\(self.status)\t\(self.reason)\t\(self.token)\n" }
    }

    /// The last record of each row, by file and line.
    public private(set) var records: [Int: [Int: Record]] = [:]

    /// Parses the log. A line that does not parse (the last one, cut by a crash) is skipped.
    public init(text: String) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 5, let file = Int(fields[0]), let number = Int(fields[1]),
                let status = Int(fields[2]), !fields[3].isEmpty, fields[4].count == 64
            else { continue }
            self.records[file, default: [:]][number] = Record(
                file: file,
                line: number,
                status: status,
                reason: String(fields[3]),
                token: String(fields[4])
            )
        }
    }

    /// The record of a row, if the log has one.
    public func record(file: Int, line: Int) -> Record? { self.records[file]?[line] }
}
