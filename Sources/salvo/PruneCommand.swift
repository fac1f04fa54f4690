import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows

/// `salvo prune TOKENS.csv --suppress FILE [--registered-at COLUMN] --output KEPT.csv [--dropped DROPPED.csv]`
struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Leave out of a token file the tokens a suppression file lists, by Apple's rule.",
        discussion: """
            A row is dropped when its token is on the suppression list (from `feedback --into` or `send \
            --unregistered`) and the device has not registered again since: with --registered-at, the row's \
            registration time (UNIX seconds or ISO 8601) is not later than the list's timestamp. Every other row \
            is kept, all columns. Streams files of any size.
            """
    )

    @Argument(help: "The CSV file of device tokens; - reads it from standard input.")
    var tokens: String

    @Option(help: "The suppression file.")
    var suppress: String

    @Option(help: "The column with each device's last registration time: a header name or a 1-based number.")
    var registeredAt: String?

    @Option(help: "The token column: a header name, or a 1-based column number.")
    var column: String = "token"

    @Option(help: "Write the rows kept here (atomically).")
    var output: String

    @Option(help: "Write the rows dropped here, with the suppression's time and reason.")
    var dropped: String?

    func validate() throws {
        let paths = [self.tokens, self.suppress, self.output] + (self.dropped.map { [$0] } ?? [])
        let canonical = paths.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        guard Set(canonical).count == canonical.count else {
            throw ValidationError("the token file, --suppress, --output and --dropped must be four different files")
        }
    }

    func run() async throws {
        try await exitingOnUserError {
            let spools = try StandardInputOption.prepare([self.tokens])
            let suppression: SuppressionList
            do {
                suppression = try SuppressionList.load(path: self.suppress)
            } catch {
                throw UserError("--suppress \(error)")
            }
            var configuration = TokenPruner.Configuration(
                input: self.tokens,
                column: Self.column(self.column),
                registeredAt: self.registeredAt.map(Self.column),
                kept: self.output,
                dropped: self.dropped
            )
            configuration.spools = spools
            let summary: TokenPruner.Summary
            do {
                summary = try TokenPruner.prune(configuration, suppression: suppression)
            } catch {
                throw UserError("\(error)")
            }
            var text = "\(summary.rows) rows: \(summary.kept) kept, \(summary.dropped) dropped"
            if summary.reregistered > 0 { text += " (\(summary.reregistered) listed but registered again: kept)" }
            if summary.unreadable > 0 { text += "; \(summary.unreadable) rows without a readable token kept" }
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
    }

    private static func column(_ text: String) -> TokenColumn {
        Int(text).map { .number($0) } ?? .name(text)
    }
}
