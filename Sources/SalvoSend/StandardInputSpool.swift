import Crypto
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// Standard input (the input file `-`) copied into a regular file, which the job then reads as any other: a job
/// reads rows again by offset (`StandardInputName`), which a pipe cannot do.
///
/// The copy goes through one fixed buffer, so memory stays bounded whatever the input's size, and is complete
/// before the job opens a connection. With a journal it is `DIR/stdin.csv` (written beside as
/// `stdin.csv.partial`, synced and renamed when whole: a spool cut short is never taken for the input; `stdin.lock`
/// held meanwhile), so that the same command run again resumes against it. Without one it is a temporary file unlinked as soon as it is
/// made: nothing is left behind however the process ends, and it is read through `/proc/self/fd`.
public struct StandardInputSpool: Sendable {
    /// The file the job reads for `-`.
    public let path: String
    /// Bytes copied.
    public let bytes: Int
    /// SHA-256 of what was copied, hex, computed as it was written.
    public let sha256: String

    /// The spool's name in a journal folder.
    public static func journalPath(_ directory: String) -> String { directory + "/stdin.csv" }

    /// The size of the one buffer the copy goes through.
    static let bufferBytes = 1 << 20

    /// Whether a rerun of a journaled job over `-` resumes against the spool of its first run: the folder holds a
    /// whole spool and a job. Then standard input is not read.
    public static func canResume(journal directory: String) -> Bool {
        access(Self.journalPath(directory), R_OK) == 0 && access(JobJournal.manifestPath(directory), R_OK) == 0
    }

    /// Refuses standard input that is a terminal: a user who typed `-` by mistake would otherwise see the command
    /// wait for input it never announced.
    ///
    /// - Returns: the reason, nil when standard input is not a terminal.
    public static func refusalForTerminal() -> String? {
        guard isatty(STDIN_FILENO) == 1 else { return nil }
        return "- reads the token CSV from standard input, which is a terminal here: pipe the CSV in "
            + "(`psql … | salvo send - …`) or name a file"
    }

    /// Copies standard input into the journal folder `directory` (made if missing) as `stdin.csv`.
    ///
    /// - Throws: `JobError(.output)` naming the spool when it cannot be written whole (a full disk);
    ///   `JobError(.input)` when standard input cannot be read or is empty.
    public static func spool(intoJournal directory: String) throws(JobError) -> StandardInputSpool {
        // `stdin.lock`: the journal's own lock is taken later, when the job opens its input, and refuses a second
        // run then; this one keeps two runs started together from writing one spool at once.
        let file = try SpoolFile.inJournal(
            directory,
            fileName: "stdin.csv",
            lockName: "stdin.lock",
            what: "the spool of standard input",
            busy: "another run is spooling or sending its standard input; nothing was read"
        )
        let copied: (bytes: Int, sha256: String)
        do throws(JobError) {
            copied = try Self.copy(from: STDIN_FILENO, to: file.descriptor, spool: file.name)
        } catch {
            file.discard()
            throw error
        }
        try file.commit()
        return StandardInputSpool(path: file.path, bytes: copied.bytes, sha256: copied.sha256)
    }

    /// Copies standard input into a temporary file in `folder` (`TMPDIR`, else `/tmp`), unlinked at once and read
    /// through `/proc/self/fd/N`: its descriptor stays open for the life of the process, and the file goes with it.
    ///
    /// - Throws: `JobError(.output)` naming the spool when it cannot be written whole (a full disk);
    ///   `JobError(.input)` when standard input cannot be read or is empty.
    public static func spoolToTemporaryFile(in folder: String? = nil) throws(JobError) -> StandardInputSpool {
        let file = try SpoolFile.temporary(in: folder, prefix: "salvo-stdin", what: "the spool of standard input")
        let copied: (bytes: Int, sha256: String)
        do throws(JobError) {
            copied = try Self.copy(from: STDIN_FILENO, to: file.descriptor, spool: file.name)
        } catch {
            file.discard()
            throw error
        }
        return StandardInputSpool(path: file.path, bytes: copied.bytes, sha256: copied.sha256)
    }

    /// Copies everything `input` holds into `output` through one fixed buffer, hashing it as it goes.
    ///
    /// - Parameter spool: the spool's name, for messages.
    /// - Throws: `JobError(.input)` when `input` cannot be read or holds nothing at all; `JobError(.output)` naming
    ///   `spool` when a write fails (`ENOSPC`: a full disk).
    static func copy(
        from input: Int32,
        to output: Int32,
        spool: String
    ) throws(JobError) -> (bytes: Int, sha256: String) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferBytes, alignment: 16)
        defer { buffer.deallocate() }
        var hash = SHA256()
        var total = 0
        while true {
            let count = read(input, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw JobError(.input, "\(StandardInputName.described): cannot read: \(Self.reason())")
            }
            if count == 0 { break }
            let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            hash.update(bufferPointer: piece)
            var written = 0
            while written < count {
                let result = write(output, piece.baseAddress! + written, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw JobError(
                        .output,
                        "the spool of standard input \(spool): cannot write (\(total + written) bytes copied): "
                            + Self.reason()
                    )
                }
                written += result
            }
            total += count
        }
        // Nothing at all: more likely a command before the pipe that failed than a job with no tokens.
        guard total > 0 else {
            throw JobError(
                .input,
                "- \(StandardInputName.described): empty: no CSV came through (did the command that feeds it fail?)"
            )
        }
        return (total, hash.finalize().map { byte in String(byte, radix: 16).leftPadded(to: 2) }.joined())
    }

    private static func reason() -> String { String(cString: strerror(errno)) }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}
