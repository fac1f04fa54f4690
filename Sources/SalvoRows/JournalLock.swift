import APNSWire
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One run per journal: a run holds an open-file-description lock (`fcntl(F_OFD_SETLK)`, a write lock over the whole
/// of `journal.lock` in the journal's folder) from before it reads the manifest until after its report and manifest
/// are written, and writes its host, pid and start time into the file for whoever finds it held.
///
/// The lock belongs to the open file description, not to the process: it is released when the descriptor closes
/// (`deinit`) or the process ends in any way (a crash, `kill -9`, a deleted pod), so a holder that is gone never
/// blocks the job; and two opens in one process exclude each other as two processes do. Linux carries these locks
/// to NFS servers as byte-range locks (NLM for NFSv3, the protocol's own for NFSv4), so they hold across the nodes of
/// a shared volume. A mount whose locks stay on this node (NFS with `nolock` or `local_lock=`, read from the mount's
/// options: there the lock call succeeds) or that cannot lock at all (ENOLCK) is refused rather than trusted.
public final class JournalLock: @unchecked Sendable {
    public let path: String
    private let descriptor: Int32

    /// Who holds a journal, as its holder wrote it.
    public struct Holder: Codable, Hashable, Sendable, CustomStringConvertible {
        public var host: String
        public var pid: Int32
        /// When the holder took the lock, ISO 8601 (UTC).
        public var started: String

        public var description: String {
            "host \(TerminalText.escaped(self.host)), pid \(self.pid), started \(TerminalText.escaped(self.started))"
        }
    }

    /// The lock file in `directory`.
    public static func path(_ directory: String) -> String { directory + "/journal.lock" }

    // Linux's values (fcntl.h, with _GNU_SOURCE): not every Glibc module map brings them in.
    private static let getLock: Int32 = 36
    private static let setLock: Int32 = 37

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Releases the lock (closing the descriptor is what releases an OFD lock).
    deinit { close(self.descriptor) }

    /// Takes the lock of the journal in `directory` (the folder is created when missing), waiting at most
    /// `waitSeconds` for a holder to end (polled every 100 ms; 0: not at all). Blocks its thread while it waits: an
    /// async caller runs it on a thread of its own.
    ///
    /// - Parameters:
    ///   - stopped: asked at each poll; a reason (a signal's) ends the wait, thrown as `JobError(.input)`.
    ///   - waitOption: the command's option that waits for a holder, named in the refusal (nil: it has none).
    /// - Throws: `JobError(.input)` naming the holder when another run holds the journal (after the wait), or saying
    ///   that the volume cannot lock; `JobError(.output)` when the folder or the lock file cannot be made.
    public static func acquire(
        _ directory: String,
        waitSeconds: Double = 0,
        stopped: (@Sendable () -> String?)? = nil,
        waitOption: String? = "--wait-for-journal"
    ) throws(JobError) -> JournalLock {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw JobError(.output, "--journal \(directory): cannot create the folder: \(error.localizedDescription)")
        }
        let path = Self.path(directory)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw JobError(.output, "--journal \(directory): cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if let problem = Self.volumeProblem(directory: directory) {
            close(descriptor)
            throw JobError(
                .input,
                "--journal \(directory): \(problem), so a second run of the job on another node could not be kept "
                    + "out: mount the volume without `nolock` (and with `local_lock=none`), or use a local disk"
            )
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, min(waitSeconds, 1e9)) * 1e9)
        while true {
            var lock = Self.wholeFile(F_WRLCK)
            if fcntl(descriptor, Self.setLock, &lock) == 0 { break }
            let failure = errno
            if failure == EINTR { continue }
            guard failure == EAGAIN || failure == EACCES else {
                close(descriptor)
                throw Self.cannotLock(directory, failure)
            }
            if DispatchTime.now().uptimeNanoseconds >= deadline {
                let holder = Self.holderText(descriptor)
                close(descriptor)
                let waited = waitSeconds > 0 ? " (waited \(Self.seconds(waitSeconds)) s)" : ""
                let orWait = waitOption.map { ", or give \($0) SECONDS to wait for it" } ?? ""
                throw JobError(
                    .input,
                    "--journal \(directory) is held by another run of the job (\(holder))\(waited): one run "
                        + "per journal. Wait for it to end\(orWait)"
                )
            }
            if let reason = stopped?() {
                let holder = Self.holderText(descriptor)
                close(descriptor)
                throw JobError(
                    .input,
                    "--journal \(directory): stopped waiting for the run holding it (\(holder)): \(reason); nothing "
                        + "was sent"
                )
            }
            usleep(100_000)
        }
        let lock = JournalLock(path: path, descriptor: descriptor)
        lock.record()
        return lock
    }

    /// Whether the journal in `directory` is held now, and by whom (for `salvo journal verify`): nil when it is
    /// free or has no lock file; a refusal of the volume is given as the holder's text.
    public static func holder(_ directory: String) -> String? {
        let descriptor = open(Self.path(directory), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var lock = Self.wholeFile(F_WRLCK)
        guard fcntl(descriptor, Self.getLock, &lock) == 0 else {
            return "unknown: the volume cannot lock (\(String(cString: strerror(errno))))"
        }
        guard lock.l_type != Int16(F_UNLCK) else { return nil }
        return Self.holderText(descriptor)
    }

    /// The holder as the lock file names it (what is there of it: a holder between taking the lock and writing
    /// its name leaves it empty).
    private static func holderText(_ descriptor: Int32) -> String {
        var bytes = [UInt8](repeating: 0, count: 1024)
        let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        let data = Data(bytes.prefix(max(read, 0)))
        if let holder = try? JSONDecoder().decode(Holder.self, from: data) { return holder.description }
        return read > 0 ? TerminalText.escaped(String(decoding: data, as: UTF8.self)) : "holder not yet recorded"
    }

    private static func cannotLock(_ directory: String, _ failure: Int32) -> JobError {
        let reason = String(cString: strerror(failure))
        if failure == ENOLCK || failure == EOPNOTSUPP || failure == ENOSYS || failure == EINVAL {
            return JobError(
                .input,
                "--journal \(directory): the volume cannot lock files (\(reason): a file system without POSIX "
                    + "locks, or NFS without its lock service), so a second run of the job could not be kept out: "
                    + "put the journal on a volume that locks (NFS without `nolock`, or a local disk)"
            )
        }
        return JobError(.input, "--journal \(directory): cannot lock \(Self.path(directory)): \(reason)")
    }

    private static func wholeFile(_ type: Int32) -> flock {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 0
        // OFD locks want l_pid zero.
        lock.l_pid = 0
        return lock
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// Writes this run's host, pid and start time into the lock file (best effort: the lock holds either way).
    private func record() {
        var name = [CChar](repeating: 0, count: 256)
        let host =
            gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
        let formatter = ISO8601DateFormatter()
        let holder = Holder(host: host, pid: getpid(), started: formatter.string(from: Date()))
        guard let data = try? JSONEncoder().encode(holder) else { return }
        _ = ftruncate(self.descriptor, 0)
        _ = data.withUnsafeBytes { pwrite(self.descriptor, $0.baseAddress, $0.count, 0) }
    }
}
