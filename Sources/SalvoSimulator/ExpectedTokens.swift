import APNSWire
import Foundation

/// The tokens a sender was asked to deliver to, read from a CSV file: one hex token per line, or a
/// header row naming a `token` column followed by rows (other columns are ignored).
///
/// Held as a `TokenSet` (33 bytes per token, no object per row) so that a verdict over millions of
/// tokens stays small. Lines that are not tokens are counted and the first few kept with their
/// line number, so a bad file is reported, not silently shrunk.
public struct ExpectedTokens: Sendable {
    /// A line that could not be read as a token.
    public struct BadLine: Sendable, Codable, Equatable {
        public var line: Int
        public var reason: String
    }

    public private(set) var tokens: TokenSet
    /// Tokens listed more than once in the file (each counted once in `tokens`).
    public private(set) var repeatedLines = 0
    public private(set) var badLineCount = 0
    /// The first bad lines (at most 20).
    public private(set) var badLines: [BadLine] = []

    /// The number of distinct expected tokens.
    public var count: Int { self.tokens.count }

    /// An expected set of exactly `tokens`.
    public init(_ tokens: [DeviceToken]) {
        self.tokens = TokenSet(expectedCount: tokens.count)
        for token in tokens {
            let inserted = token.withUnsafeBytes { self.tokens.insert($0) }
            if !inserted { self.repeatedLines += 1 }
        }
    }

    /// Parses CSV text (UTF-8 bytes).
    public init(csv bytes: UnsafeRawBufferPointer) {
        self.tokens = TokenSet(expectedCount: max(16, bytes.count / 65))
        var column = 0
        var lineNumber = 0
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            lineNumber += 1
            var end = lineEnd
            if end > lineStart && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let line = UnsafeRawBufferPointer(rebasing: bytes[lineStart..<end])
            lineStart = lineEnd + 1
            if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { continue }
            if lineNumber == 1, let header = Self.headerColumn(line) {
                column = header
                continue
            }
            guard let field = Self.field(line, column) else {
                self.bad(lineNumber, "no column \(column + 1)")
                continue
            }
            do {
                let token = try DeviceToken(hexUTF8: field)
                if !token.withUnsafeBytes({ self.tokens.insert($0) }) { self.repeatedLines += 1 }
            } catch {
                self.bad(lineNumber, "\(error)")
            }
        }
    }

    /// Reads a CSV file.
    public static func read(contentsOf path: String) throws(SimulatorError) -> ExpectedTokens {
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe)
            return data.withUnsafeBytes { ExpectedTokens(csv: $0) }
        } catch {
            throw SimulatorError(.expectedTokens, "cannot read expected tokens from \(path): \(error)")
        }
    }

    private mutating func bad(_ line: Int, _ reason: String) {
        self.badLineCount += 1
        if self.badLines.count < 20 { self.badLines.append(BadLine(line: line, reason: reason)) }
    }

    /// The index of the `token` column when `line` is a header row (any field that is not hex).
    private static func headerColumn(_ line: UnsafeRawBufferPointer) -> Int? {
        let fields = String(decoding: line, as: UTF8.self).split(separator: ",", omittingEmptySubsequences: false)
        let names = fields.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t\"")).lowercased() }
        return names.firstIndex(of: "token") ?? names.firstIndex(of: "device_token")
            ?? names.firstIndex(of: "devicetoken")
    }

    /// The bytes of field `column` (0-based), without surrounding quotes.
    private static func field(_ line: UnsafeRawBufferPointer, _ column: Int) -> UnsafeRawBufferPointer? {
        var start = 0
        var index = 0
        for position in 0...line.count where position == line.count || line[position] == UInt8(ascii: ",") {
            if index == column {
                var from = start
                var to = position
                while from < to && (line[from] == UInt8(ascii: "\"") || line[from] == UInt8(ascii: "\t")) { from += 1 }
                while to > from && (line[to - 1] == UInt8(ascii: "\"") || line[to - 1] == UInt8(ascii: "\t")) {
                    to -= 1
                }
                return UnsafeRawBufferPointer(rebasing: line[from..<to])
            }
            index += 1
            start = position + 1
        }
        return nil
    }
}
