import SalvoRows

/// A CSV file read whole (channel inventories and broadcast inputs hold at most some 10,000 rows per app): the
/// header's names and each record with the line it starts on.
public struct CSVTable: Sendable {
    public var header: [String]
    public var rows: [(line: Int, fields: [String])]

    /// Reads `path` with the project's RFC 4180 reader (quotes, CRLF, a byte-order mark, blank lines skipped).
    ///
    /// - Throws: `InputError` naming the file (and line) when it cannot be read or parsed, or has no header.
    public static func read(_ path: String) throws(InputError) -> CSVTable {
        let reader = try CSVReader(path: path)
        var table = CSVTable(header: [], rows: [])
        var first = true
        while let line = try reader.next() {
            let fields = (0..<reader.fields.count).map { reader.string($0) }
            if first {
                table.header = fields.map { $0.trimmingCharacters(in: " \t") }
                first = false
            } else {
                table.rows.append((line, fields))
            }
        }
        guard !first else { throw InputError(file: path, line: nil, message: "the file is empty (no header row)") }
        return table
    }

    /// The index of the column named `name` (without regard to case), or of the 1-based number `name`.
    public func column(_ name: String) -> Int? {
        if let number = Int(name), number >= 1 { return number <= self.header.count ? number - 1 : nil }
        return self.header.firstIndex { $0.lowercased() == name.lowercased() }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text.removeFirst() }
        while let last = text.last, set.contains(last) { text.removeLast() }
        return String(text)
    }
}

/// The channels a job created: one row per channel, `name,channel_id,policy,environment,created_at,bundle_id`.
/// Written whole or not at all (`AtomicFileWriter`), and only with channels APNs confirmed (created, or adopted by
/// reconciliation), so it is always true for what did succeed. Each row names its app, environment and storage
/// policy, so that an inventory is never taken for another app's, environment's or policy's (`mismatch`); an
/// inventory written before the `bundle_id` column is read with its rows' app unknown.
public struct ChannelInventory: Hashable, Sendable {
    public struct Entry: Hashable, Sendable, Codable {
        /// The name the channel was created for (an event, a game); unique within an inventory.
        public var name: String
        public var channelID: String
        public var policy: MessageStoragePolicy
        public var environment: BroadcastEnvironment
        /// When APNs answered the create (ISO 8601, UTC).
        public var createdAt: String
        /// The app the channel belongs to; nil in an inventory written before the column.
        public var bundleID: String?

        public init(
            name: String,
            channelID: String,
            policy: MessageStoragePolicy,
            environment: BroadcastEnvironment,
            createdAt: String,
            bundleID: String? = nil
        ) {
            self.name = name
            self.channelID = channelID
            self.policy = policy
            self.environment = environment
            self.createdAt = createdAt
            self.bundleID = bundleID
        }

        var csvLine: String {
            [
                self.name, self.channelID, self.policy.name, self.environment.rawValue, self.createdAt,
                self.bundleID ?? "",
            ]
            .map(csvField).joined(separator: ",")
        }
    }

    /// The columns every inventory has; `bundle_id` is written too, and read when present.
    public static let columns = ["name", "channel_id", "policy", "environment", "created_at"]
    public static let header = (columns + ["bundle_id"]).joined(separator: ",")

    public var entries: [Entry]

    public init(entries: [Entry] = []) {
        self.entries = entries
    }

    /// Reads an inventory, checking every row: the five columns present, a unique name and id per row, an id that
    /// is base64, a policy `none` or `most-recent`, an environment `development` or `production`.
    ///
    /// - Throws: `InputError` with the first problems (file, line, value); `problems(in:)` lists them all.
    public static func read(_ path: String) throws(InputError) -> ChannelInventory {
        let (inventory, problems) = try Self.check(path)
        if let first = problems.first {
            let more = problems.count > 1 ? " (and \(problems.count - 1) more problems)" : ""
            throw InputError(file: path, line: first.line, message: first.message + more)
        }
        return inventory
    }

    /// Every problem of the inventory at `path`, each with its line (nil for the header): what `salvo check` prints.
    public static func check(_ path: String) throws(InputError) -> (ChannelInventory, [(line: Int?, message: String)]) {
        let table = try CSVTable.read(path)
        var problems: [(line: Int?, message: String)] = []
        var indices: [Int] = []
        for column in Self.columns {
            guard let index = table.column(column) else {
                problems.append((nil, "no \(column) column (the header is \(Self.header))"))
                continue
            }
            indices.append(index)
        }
        guard problems.isEmpty else { return (ChannelInventory(), problems) }
        let bundleColumn = table.column("bundle_id")
        var inventory = ChannelInventory()
        var names: [String: Int] = [:]
        var ids: [String: Int] = [:]
        for (line, fields) in table.rows {
            guard fields.count >= table.header.count else {
                problems.append((line, "\(fields.count) fields, the header has \(table.header.count)"))
                continue
            }
            let values = indices.map { fields[$0] }
            let (name, id, policyName, environmentName, createdAt) = (
                values[0], values[1], values[2], values[3], values[4]
            )
            var good = true
            if name.isEmpty {
                problems.append((line, "the name is empty"))
                good = false
            } else if let earlier = names[name] {
                problems.append((line, "the name \(name) is also on line \(earlier)"))
                good = false
            }
            if !ChannelID.isWellFormed(id) {
                problems.append((line, "channel_id '\(id)' is not base64 (APNs would answer BadChannelId)"))
                good = false
            } else if let earlier = ids[id] {
                problems.append((line, "channel_id \(id) is also on line \(earlier)"))
                good = false
            }
            let policy = MessageStoragePolicy(name: policyName)
            if policy == nil {
                problems.append((line, "policy '\(policyName)' is not none or most-recent"))
                good = false
            }
            let environment = BroadcastEnvironment(rawValue: environmentName)
            if environment == nil {
                problems.append((line, "environment '\(environmentName)' is not development or production"))
                good = false
            }
            names[name] = names[name] ?? line
            ids[id] = ids[id] ?? line
            let bundleID = bundleColumn.flatMap { $0 < fields.count && !fields[$0].isEmpty ? fields[$0] : nil }
            if good, let policy, let environment {
                inventory.entries.append(
                    Entry(
                        name: name,
                        channelID: id,
                        policy: policy,
                        environment: environment,
                        createdAt: createdAt,
                        bundleID: bundleID
                    )
                )
            }
        }
        return (inventory, problems)
    }

    /// The first row whose app, environment or (when given) storage policy differs from a job's, as a sentence naming
    /// both; nil when every row matches. A row without an app (an inventory written before the column) matches any.
    public func mismatch(
        bundleID: String,
        environment: BroadcastEnvironment,
        policy: MessageStoragePolicy? = nil
    ) -> String? {
        for entry in self.entries {
            let app = entry.bundleID ?? bundleID
            guard app != bundleID || entry.environment != environment || (policy != nil && entry.policy != policy)
            else { continue }
            let policyText = policy.map { " with policy \($0.name)" } ?? ""
            let entryPolicy = policy == nil ? "" : " with policy \(entry.policy.name)"
            return "its channels are \(app)'s in \(entry.environment.rawValue)\(entryPolicy) (channel \(entry.name), "
                + "\(entry.channelID)), and this is for \(bundleID) in \(environment.rawValue)\(policyText)"
        }
        return nil
    }

    /// Writes the inventory whole to `path` (a temporary file renamed over it).
    public func write(to path: String) throws(JobError) {
        let writer = try AtomicFileWriter(path: path)
        try writer.write(Self.header + "\n")
        for entry in self.entries { try writer.write(entry.csvLine + "\n") }
        try writer.commit()
    }
}
