import ArgumentParser
import Foundation
import SalvoConsole
import SalvoSend

/// `salvo journal verify DIR`: what a send's journal folder proves.
struct JournalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "journal",
        abstract: "Look into a send's journal folder (send --journal DIR).",
        subcommands: [Verify.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Say what a journal holds and whether its rows' states can be trusted.",
            discussion: """
                Prints the manifest, the state file's header, how many rows are in each state, the bytes that are \
                not states (with the offsets of the first few) and the run that holds the journal, if any. Reads \
                only: safe beside a running job. Exit status: 0 when the journal is intact, 3 when it is damaged \
                (a send refuses it; --journal-restart begins the job again).
                """
        )

        @Argument(help: "The journal folder.")
        var directory: String

        func run() async throws {
            let verification = JournalVerification(self.directory)
            for line in verification.lines { print(line) }
            if !verification.isIntact { throw ExitCode(3) }
        }
    }
}
