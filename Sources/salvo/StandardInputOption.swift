import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows
import SalvoSend

#if canImport(Glibc)
import Glibc
#endif

/// `-` among a command's token files: standard input, copied into a file before anything else reads it
/// (`StandardInputSpool`), then read as any other file under the name `-`.
enum StandardInputOption {
    /// Refuses `-` named more than once: standard input can be read once.
    static func validate(_ files: [String]) throws(ValidationError) {
        if files.filter({ $0 == StandardInputName.name }).count > 1 {
            throw ValidationError("- (standard input) is named more than once: it can be read once")
        }
    }

    /// Spools standard input when `files` name `-`, and returns the spools that name it (none without `-`).
    ///
    /// With a journal: a folder that holds the spool and the job of an earlier run resumes against that spool, and
    /// this run's standard input is not read (a note says so); otherwise standard input is spooled into the folder
    /// (with `restart` too, whatever it holds). Without one: into a temporary file, gone when the process ends.
    ///
    /// Standard input that is a terminal is refused (exit 64), as is `-` named twice; a spool that cannot be written
    /// is a `UserError` naming it (exit 3).
    static func prepare(_ files: [String], journal: String? = nil, restart: Bool = false) throws -> InputSpools {
        var spools = InputSpools()
        guard files.contains(StandardInputName.name) else { return spools }
        try Self.validate(files)
        if let journal, !restart, StandardInputSpool.canResume(journal: journal) {
            let path = StandardInputSpool.journalPath(journal)
            printError(
                "--journal \(journal) holds the standard input its first run spooled (\(path)): the job resumes "
                    + "against it, and this run's standard input is not read",
                prefix: "note: "
            )
            spools.read(StandardInputName.name, from: path)
            return spools
        }
        if let reason = StandardInputSpool.refusalForTerminal() {
            printError(reason)
            throw ExitCode(64)
        }
        let spool: StandardInputSpool
        do {
            spool =
                if let journal {
                    try StandardInputSpool.spool(intoJournal: journal)
                } else {
                    try StandardInputSpool.spoolToTemporaryFile()
                }
        } catch {
            throw UserError(error.description)
        }
        spools.read(StandardInputName.name, from: spool.path)
        return spools
    }
}
