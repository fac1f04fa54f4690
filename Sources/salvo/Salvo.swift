import ArgumentParser
import SalvoConsole

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// `salvo`: bulk Apple push notifications over the binary provider interface and HTTP/2.
@main
struct Salvo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "salvo",
        abstract: "Send Apple push notifications in bulk: fast, and with nothing lost or duplicated.",
        subcommands: [
            SendCommand.self, FeedbackCommand.self, PruneCommand.self, DemoCommand.self, SimulateCommand.self,
            PayloadCommand.self, CheckCommand.self, TokensCommand.self, TokenCommand.self,
            ReportCommand.self,
            SoakCommand.self, JournalCommand.self, ChannelsCommand.self, BroadcastCommand.self, ServeCommand.self,
        ]
    )

    /// Standard output is line-buffered even into a pipe or a file, so that a run killed mid-send has printed every
    /// line it wrote.
    static func main() async {
        setvbuf(stdout, nil, _IOLBF, 0)
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
