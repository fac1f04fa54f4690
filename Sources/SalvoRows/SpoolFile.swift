#if canImport(Glibc)
import Glibc
#endif

/// The file an input that is not a file (standard input, a query's rows) is copied into, so that a job can read it
/// as any token file: again and by offset, which a pipe or a result set cannot do.
///
/// In a journal folder (`inJournal`) it is written beside as `NAME.partial`, synced and renamed when whole, and the
/// folder synced (`commit`): a spool cut short is never taken for the input, and a resumed job finds the spool its
/// journal counts on; `LOCK` is held meanwhile, so two runs started together never write one spool at once.
/// Otherwise (`temporary`) it is unlinked as soon as it is made and read through `/proc/self/fd/N`: nothing is left
/// behind however the process ends.
public struct SpoolFile: Sendable {
    /// Where the copy writes.
    public let descriptor: Int32
    /// The file a job reads once the copy is done: the journal's file, or `/proc/self/fd/N`.
    public let path: String
    /// The name to give in messages about writing it.
    public let name: String
    /// What it holds, for messages ("the spool of standard input").
    public let what: String
    private let partial: String?
    private let directory: String?
    /// The journal folder's lock, held from `inJournal` on (nil for a temporary file).
    private let lock: Int32?

    /// Opens `directory/fileName.partial` (the folder made if missing) after taking `directory/lockName` for the
    /// life of the process.
    ///
    /// - Parameter busy: why a second run cannot take the lock, said after the folder and the lock's path.
    /// - Throws: `JobError(.input)` with `busy` when another run holds the lock; `JobError(.output)` when the
    ///   folder, the lock or the file cannot be made.
    public static func inJournal(
        _ directory: String,
        fileName: String,
        lockName: String,
        what: String,
        busy: String
    ) throws(JobError) -> SpoolFile {
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw JobError(.output, "--journal \(directory): cannot create the folder: \(Self.reason())")
        }
        let lock = directory + "/" + lockName
        // Never closed: the lock goes with the process.
        let held = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard held >= 0 else {
            throw JobError(.output, "--journal \(directory): cannot create \(lock): \(Self.reason())")
        }
        guard flock(held, LOCK_EX | LOCK_NB) == 0 else {
            let reason = Self.reason()
            close(held)
            throw JobError(.input, "--journal \(directory): \(busy) (\(lock): \(reason))")
        }
        let path = directory + "/" + fileName
        let partial = path + ".partial"
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let reason = Self.reason()
            close(held)
            throw JobError(.output, "\(what) \(partial): cannot create: \(reason)")
        }
        return SpoolFile(
            descriptor: descriptor,
            path: path,
            name: partial,
            what: what,
            partial: partial,
            directory: directory,
            lock: held
        )
    }

    /// Makes a file in `folder` (`TMPDIR`, else `/tmp`) named from `prefix`, unlinked at once.
    ///
    /// - Throws: `JobError(.output)` when it cannot be made.
    public static func temporary(in folder: String? = nil, prefix: String, what: String) throws(JobError) -> SpoolFile {
        let base = folder ?? Self.temporaryFolder
        var template = Array((base + "/" + prefix + "-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw JobError(.output, "\(what) in \(base): cannot create: \(Self.reason())")
        }
        let name = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        unlink(name)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return SpoolFile(
            descriptor: descriptor,
            path: "/proc/self/fd/\(descriptor)",
            name: "\(name) (in \(base))",
            what: what,
            partial: nil,
            directory: nil,
            lock: nil
        )
    }

    /// The copy is whole. In a journal: synced, closed, renamed into place and the folder synced. A temporary file
    /// stays open (its descriptor is how it is read).
    ///
    /// - Throws: `JobError(.output)` when it cannot be synced or renamed (the partial file is removed).
    public func commit() throws(JobError) {
        guard let partial, let directory else { return }
        guard fsync(self.descriptor) == 0 else {
            let reason = Self.reason()
            self.discard()
            throw JobError(.output, "\(self.what) \(partial): cannot sync: \(reason)")
        }
        close(self.descriptor)
        guard rename(partial, self.path) == 0 else {
            let reason = Self.reason()
            unlink(partial)
            throw JobError(.output, "\(self.what) \(self.path): cannot rename \(partial): \(reason)")
        }
        // The rename is durable once the folder is synced.
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }

    /// The copy failed: the file is closed and a journal's partial file removed.
    public func discard() {
        close(self.descriptor)
        if let partial { unlink(partial) }
    }

    /// Lets go of the journal folder's lock, which is otherwise held for the life of the process: for a process
    /// that runs many jobs (the service's campaigns), once the spool is committed or discarded.
    public func releaseLock() {
        if let lock { close(lock) }
    }

    /// `TMPDIR` when set, else `/tmp`.
    public static var temporaryFolder: String {
        guard let variable = getenv("TMPDIR"), variable.pointee != 0 else { return "/tmp" }
        let folder = String(cString: variable)
        return folder.count > 1 && folder.hasSuffix("/") ? String(folder.dropLast()) : folder
    }

    private static func reason() -> String { String(cString: strerror(errno)) }
}
