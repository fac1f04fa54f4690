import APNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The tokens not to send to, with since when: one CSV format for the feedback service's tuples, HTTP/2 410
/// answers and both interfaces' invalid-token refusals, so that all of them accumulate in one file.
///
/// The file: a header `token,timestamp,time,reason`, then one row per token — 64 lowercase hex digits, UNIX
/// seconds, the same time in ISO 8601 (for people; `timestamp` is the one read back), and where the fact came
/// from (`Feedback`, `Unregistered`, `InvalidToken`, `BadDeviceToken`). A file with only the first three columns
/// (`salvo feedback`'s output) reads the same. One entry per token: merging keeps the newest timestamp.
///
/// Apple's rule (`suppresses`): drop a token that is on the list unless the device registered it again after
/// the list's timestamp. Held in memory (a dictionary of inline tokens), while the files it is applied to stream.
public struct SuppressionList: Sendable {
    /// One suppressed token.
    public struct Entry: Hashable, Sendable {
        public var token: DeviceToken
        /// Since when the token is gone or refused (UNIX seconds).
        public var timestamp: Int64
        /// Where the fact came from; empty when the file did not say.
        public var reason: String

        public init(token: DeviceToken, timestamp: Int64, reason: String) {
            self.token = token
            self.timestamp = timestamp
            self.reason = reason
        }

        /// The row of the file, without its line end.
        public var csvLine: String {
            [self.token.hexString, String(self.timestamp), UnixTime.iso8601(self.timestamp), self.reason]
                .map(csvField).joined(separator: ",")
        }
    }

    /// The header of a suppression file.
    public static let csvHeader = "token,timestamp,time,reason"
    /// The header of `salvo feedback`'s output (a suppression file without reasons).
    public static let feedbackHeader = "token,timestamp,time"

    public private(set) var entries: [DeviceToken: Entry] = [:]

    public init() {}

    public var count: Int { self.entries.count }

    /// Adds `entry`; a token already listed keeps the newer timestamp (and that timestamp's reason).
    ///
    /// - Returns: whether the list changed.
    @discardableResult
    public mutating func add(_ entry: Entry) -> Bool {
        if let existing = self.entries[entry.token], existing.timestamp >= entry.timestamp { return false }
        self.entries[entry.token] = entry
        return true
    }

    /// Adds every entry of `other`.
    public mutating func merge(_ other: SuppressionList) {
        for entry in other.entries.values { self.add(entry) }
    }

    /// Apple's rule: the entry that drops `token`, or nil when the token stays — it is not listed, or the
    /// device registered it again (`registeredAt`, UNIX seconds) after the list's timestamp.
    public func suppresses(_ token: DeviceToken, registeredAt: Int64? = nil) -> Entry? {
        guard let entry = self.entries[token] else { return nil }
        if let registeredAt, registeredAt > entry.timestamp { return nil }
        return entry
    }

    /// The entries, ordered by token (so that a file written twice from the same facts is the same file).
    public var sortedEntries: [Entry] {
        self.entries.values.sorted { $0.token.hexString < $1.token.hexString }
    }

    /// Reads a suppression file (or `salvo feedback`'s output).
    ///
    /// - Throws: `InputError` naming the file, line and value of a row that is not a token and a time.
    public static func load(path: String) throws(InputError) -> SuppressionList {
        let reader = try CSVReader(path: path)
        var list = SuppressionList()
        var tokenColumn = 0
        var timestampColumn = 1
        var timeColumn: Int? = 2
        var reasonColumn: Int? = 3
        var first = true
        while let line = try reader.next() {
            if first {
                first = false
                let names = (0..<reader.fields.count).map { reader.string($0).lowercased() }
                if names.contains("token") {
                    guard let token = names.firstIndex(of: "token"),
                        let timestamp = names.firstIndex(of: "timestamp") ?? names.firstIndex(of: "time")
                    else {
                        throw InputError(
                            file: path,
                            line: line,
                            message: "the header names no timestamp column: write `\(Self.csvHeader)`"
                        )
                    }
                    tokenColumn = token
                    timestampColumn = timestamp
                    timeColumn = names.firstIndex(of: "time")
                    reasonColumn = names.firstIndex(of: "reason")
                    continue
                }
            }
            let fieldCount = reader.fields.count
            guard tokenColumn < fieldCount else {
                throw InputError(file: path, line: line, message: "no token column: write `\(Self.csvHeader)`")
            }
            let token: DeviceToken
            do {
                token = try reader.withField(tokenColumn) { bytes throws(DeviceTokenError) in
                    try DeviceToken(hexUTF8: bytes)
                }
            } catch {
                throw InputError(
                    file: path,
                    line: line,
                    message: "token \"\(reader.string(tokenColumn))\": \(error); fix or remove the row"
                )
            }
            var timestamp = timestampColumn < fieldCount ? reader.withField(timestampColumn, UnixTime.parse) : nil
            if timestamp == nil, let timeColumn, timeColumn < fieldCount {
                timestamp = reader.withField(timeColumn, UnixTime.parse)
            }
            guard let timestamp else {
                let value = timestampColumn < fieldCount ? reader.string(timestampColumn) : ""
                throw InputError(
                    file: path,
                    line: line,
                    message: "timestamp \"\(value)\" is not UNIX seconds or ISO 8601; fix or remove the row"
                )
            }
            let reason = reasonColumn.flatMap { $0 < fieldCount ? reader.string($0) : nil } ?? ""
            list.add(Entry(token: token, timestamp: timestamp, reason: reason))
        }
        return list
    }

    /// Reads `path` when it exists; an empty list when it does not.
    public static func loadIfPresent(path: String) throws(InputError) -> SuppressionList {
        guard access(path, F_OK) == 0 else { return SuppressionList() }
        return try Self.load(path: path)
    }

    /// Writes the list to `path` atomically (whole, or the old file left as it was).
    public func write(to path: String, header: String = SuppressionList.csvHeader) throws(JobError) {
        let writer = try AtomicFileWriter(path: path)
        let withReason = header == Self.csvHeader
        try writer.write(header + "\n")
        for entry in self.sortedEntries {
            if withReason {
                try writer.write(entry.csvLine + "\n")
            } else {
                try writer.write(
                    "\(entry.token.hexString),\(entry.timestamp),\(UnixTime.iso8601(entry.timestamp))\n"
                )
            }
        }
        try writer.commit()
    }

    /// Merges this list into the file at `path` (created when missing): one row per token, the newest
    /// timestamp kept, written atomically.
    ///
    /// - Returns: the merged list.
    @discardableResult
    public func merge(into path: String) throws(JobError) -> SuppressionList {
        var merged: SuppressionList
        do {
            merged = try Self.loadIfPresent(path: path)
        } catch {
            throw JobError(.input, "\(error.description) (the suppression file to merge into)")
        }
        merged.merge(self)
        try merged.write(to: path)
        return merged
    }
}
