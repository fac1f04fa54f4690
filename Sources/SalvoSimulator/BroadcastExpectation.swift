import Foundation

/// What a broadcast run should have delivered: channel id → how many distinct updates each channel should get, for
/// `ChannelRegistry.verdict(expected:)`, read from a channel inventory CSV.
public enum BroadcastExpectation {
    /// Reads a CSV with a header naming a channel id column (`channel id`, `channel_id`, `channel-id`, `channelId` or
    /// `apns-channel-id`, any case) and, optionally, an `updates` column (default `updatesPerChannel`); or a file
    /// of bare channel ids, one a line. Empty lines are skipped; a channel listed twice adds its counts.
    public static func read(
        contentsOf path: String,
        updatesPerChannel: Int = 1
    ) throws(SimulatorError) -> [String: Int] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SimulatorError(.expectedTokens, "cannot read the expected channels \(path): \(error)")
        }
        return try Self.parse(text, path: path, updatesPerChannel: updatesPerChannel)
    }

    static func parse(_ text: String, path: String, updatesPerChannel: Int) throws(SimulatorError) -> [String: Int] {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        func cells(_ line: Substring) -> [String] {
            line.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        func normalized(_ name: String) -> String { name.lowercased().filter { $0.isLetter || $0.isNumber } }
        var idColumn = 0
        var updatesColumn: Int?
        var first = 0
        if let header = lines.first.map(cells) {
            let names = header.map(normalized)
            if let column = names.firstIndex(where: { $0 == "channelid" || $0 == "apnschannelid" }) {
                idColumn = column
                updatesColumn = names.firstIndex(of: "updates")
                first = 1
            } else if header.count > 1 {
                throw SimulatorError(
                    .expectedTokens,
                    "\(path):1: no channel id column (channel id, channel_id, channel-id, apns-channel-id) in "
                        + "\(header.joined(separator: ","))"
                )
            }
        }
        var expected: [String: Int] = [:]
        for (index, line) in lines.enumerated().dropFirst(first) {
            let row = cells(line)
            guard row.contains(where: { !$0.isEmpty }) else { continue }
            guard idColumn < row.count, ChannelBook.isWellFormed(row[idColumn]) else {
                throw SimulatorError(
                    .expectedTokens,
                    "\(path):\(index + 1): not a channel id: \(idColumn < row.count ? row[idColumn] : "(no column \(idColumn + 1))")"
                )
            }
            var count = updatesPerChannel
            if let column = updatesColumn {
                guard column < row.count, let value = Int(row[column]), value >= 0 else {
                    throw SimulatorError(.expectedTokens, "\(path):\(index + 1): updates is a whole number ≥ 0")
                }
                count = value
            }
            expected[row[idColumn], default: 0] += count
        }
        return expected
    }
}
