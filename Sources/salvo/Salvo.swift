import ArgumentParser

/// `salvo`: bulk Apple push notifications over the binary provider interface and HTTP/2.
@main
struct Salvo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "salvo",
        abstract: "Send Apple push notifications in bulk: fast, and with nothing lost or duplicated.",
        subcommands: [
            SendCommand.self, FeedbackCommand.self, PruneCommand.self, DemoCommand.self, SimulateCommand.self,
            PayloadCommand.self, TokensCommand.self, TokenCommand.self, BenchCommand.self, ReportCommand.self,
        ]
    )
}
