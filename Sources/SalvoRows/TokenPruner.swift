import APNSWire

/// `salvo prune`: copies a token file, leaving out the rows Apple's rule drops (`SuppressionList.suppresses`),
/// and lists those with the reason. Streams the file (one record at a time through `CSVReader`), so files of any
/// size take bounded memory; only the suppression list is held whole.
public enum TokenPruner {
    /// What to prune and where the rows go.
    public struct Configuration: Sendable {
        public var input: String
        /// The file that holds `input` when it is not a file of its name (`-`: standard input's spool).
        public var spools = InputSpools()
        /// The token column: a header name, or a 1-based number.
        public var column: TokenColumn
        /// The column with each device's last registration (UNIX seconds or ISO 8601), by header name or number;
        /// nil: every listed token is dropped.
        public var registeredAt: TokenColumn?
        /// Every row kept, all columns, header first.
        public var kept: String
        /// The rows dropped, all columns, then `suppressed_since` and `reason`; nil: not written.
        public var dropped: String?

        public init(
            input: String,
            column: TokenColumn = .name("token"),
            registeredAt: TokenColumn? = nil,
            kept: String,
            dropped: String? = nil
        ) {
            self.input = input
            self.column = column
            self.registeredAt = registeredAt
            self.kept = kept
            self.dropped = dropped
        }
    }

    /// What pruning did.
    public struct Summary: Hashable, Sendable {
        public var rows = 0
        public var kept = 0
        public var dropped = 0
        /// Listed tokens kept because the device registered again after the list's timestamp.
        public var reregistered = 0
        /// Rows whose token column is not a token: kept, as `salvo send` names them.
        public var unreadable = 0
    }

    /// Prunes `configuration.input` by `suppression`; both outputs are written atomically.
    ///
    /// - Throws: `JobError(.input)` naming the file, line and value for a file that cannot be read, a column
    ///   that is not there or a registration time that is neither UNIX seconds nor ISO 8601; `JobError(.output)`
    ///   for an output that cannot be written.
    public static func prune(
        _ configuration: Configuration,
        suppression: SuppressionList
    ) throws(JobError) -> Summary {
        do {
            return try Self.run(configuration, suppression: suppression)
        } catch let error as InputError {
            throw JobError(.input, error.description)
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(.input, "\(configuration.input): \(error)")
        }
    }

    private static func run(_ configuration: Configuration, suppression: SuppressionList) throws -> Summary {
        let path = configuration.input
        let reader = try CSVReader(path: path, spools: configuration.spools)
        let kept = try AtomicFileWriter(path: configuration.kept)
        let dropped = try configuration.dropped.map { path throws(JobError) in try AtomicFileWriter(path: path) }
        var summary = Summary()
        var tokenColumn = 0
        var registeredColumn: Int?
        var line = try reader.next()
        let needsHeader: Bool = {
            if case .name = configuration.column { return true }
            if case .name? = configuration.registeredAt { return true }
            return false
        }()
        var record: [String] = []
        func fields() -> [String] { (0..<reader.fields.count).map { reader.string($0) } }
        func column(_ choice: TokenColumn, in names: [String], at line: Int) throws -> Int {
            switch choice {
            case .number(let number):
                guard number >= 1 else {
                    throw InputError(file: path, line: nil, message: "column numbers start at 1 (got \(number))")
                }
                return number - 1
            case .name(let name):
                guard let index = names.firstIndex(where: { $0.trimmingSpaces == name }) else {
                    throw InputError(
                        file: path,
                        line: line,
                        message: "no column named '\(name)' in the header (it has: \(names.joined(separator: ", ")))"
                    )
                }
                return index
            }
        }
        if let first = line {
            let names = fields()
            let isHeader =
                needsHeader
                || reader.withField(
                    min(names.count - 1, (try? column(configuration.column, in: names, at: first)) ?? 0)
                ) {
                    (try? DeviceToken(hexUTF8: $0)) == nil
                }
            tokenColumn = try column(configuration.column, in: names, at: first)
            registeredColumn = try configuration.registeredAt.map { try column($0, in: names, at: first) }
            if isHeader {
                try kept.write(Self.csvLine(names))
                try dropped?.write(Self.csvLine(names + ["suppressed_since", "reason"]))
                line = try reader.next()
            }
        }
        while let current = line {
            summary.rows += 1
            record = fields()
            var entry: SuppressionList.Entry?
            if tokenColumn < reader.fields.count,
                let token = reader.withField(tokenColumn, { try? DeviceToken(hexUTF8: $0) })
            {
                var registered: Int64?
                if let registeredColumn, registeredColumn < reader.fields.count, !record[registeredColumn].isEmpty {
                    guard let time = reader.withField(registeredColumn, UnixTime.parse) else {
                        throw InputError(
                            file: path,
                            line: current,
                            message:
                                "registration time \"\(record[registeredColumn])\" is not UNIX seconds or ISO 8601; fix the row"
                        )
                    }
                    registered = time
                }
                entry = suppression.suppresses(token, registeredAt: registered)
                if entry == nil && suppression.entries[token] != nil { summary.reregistered += 1 }
            } else {
                summary.unreadable += 1
            }
            if let entry {
                summary.dropped += 1
                let reason = entry.reason.isEmpty ? "Suppressed" : entry.reason
                try dropped?.write(Self.csvLine(record + [UnixTime.iso8601(entry.timestamp), reason]))
            } else {
                summary.kept += 1
                try kept.write(Self.csvLine(record))
            }
            line = try reader.next()
        }
        try kept.commit()
        try dropped?.commit()
        return summary
    }

    private static func csvLine(_ fields: [String]) -> String {
        fields.map(csvField).joined(separator: ",") + "\n"
    }
}
