import APNSWire

extension TokenSource {
    public struct Options: Hashable, Sendable {
        public var column: TokenColumn
        public var header: HeaderMode
        public var dedupe: Bool
        /// Only the rows of this partition are sent (nil: every row).
        public var partition: Partition?
        /// How the token column writes a token.
        public var encoding: TokenEncoding
        /// The column with each device's last registration (UNIX seconds or ISO 8601): a suppressed token whose
        /// device registered after the list's timestamp is sent (Apple's rule). Nil: every listed token is left
        /// out.
        public var registeredAt: TokenColumn?

        public init(
            column: TokenColumn = .name("token"),
            header: HeaderMode = .auto,
            dedupe: Bool = false,
            partition: Partition? = nil,
            encoding: TokenEncoding = .hex,
            registeredAt: TokenColumn? = nil
        ) {
            self.column = column
            self.header = header
            self.dedupe = dedupe
            self.partition = partition
            self.encoding = encoding
            self.registeredAt = registeredAt
        }
    }

    /// What validation found.
    public struct Summary: Hashable, Sendable {
        /// Rows that will be sent.
        public var validRows: Int
        /// Rows that will not, with reasons, in file and line order.
        public var rejects: [InputReject]
        /// Valid rows left out because `suppression` lists their token (not sent, not in `validRows`).
        public var suppressed = 0
        /// Listed tokens sent all the same: their device registered again after the list's timestamp.
        public var reregistered = 0
        /// Without `dedupe`: valid rows whose token an earlier valid row already holds (sent all the same).
        public var duplicates = 0
        /// Rows left to the other partitions (good rows whose token hashes elsewhere, and bad rows outside
        /// partition 0).
        public var otherPartitions = 0
        /// Every row of the input: valid, refused, suppressed and in other partitions.
        public var inputRows: Int { self.validRows + self.rejects.count + self.suppressed + self.otherPartitions }
        /// Per file, one more than the line number of its last row (the journal's size).
        public var lineCounts: [Int] = []
        /// With a payload per row: the largest payload a row rendered to within the limit, in bytes (0 without).
        public var largestPayload = 0
        /// With a journal attached before validation: what earlier runs of the job settled among the valid rows.
        public var journaled = JournalTally()
        /// Whether these are the counts of the whole input. False for the summary of a source opened with
        /// `open()` before its last row is taken: the counts so far (`TokenSource.summary` has the final one).
        public var isFinal = true

        public init(validRows: Int, rejects: [InputReject]) {
            self.validRows = validRows
            self.rejects = rejects
        }
    }
}
