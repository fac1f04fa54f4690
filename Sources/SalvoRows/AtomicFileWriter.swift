#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes a file whole or not at all: into a temporary file beside it, buffered, renamed over the path by
/// `commit`. A writer dropped before `commit` removes its temporary file, so a failed run leaves the old file
/// (a suppression list, a kept-tokens file) as it was, and a full disk (`ENOSPC`) or an I/O error (`EIO`), met by a
/// write, the sync or the close, is a thrown `JobError(.output)` that names the path and the cause, never a file
/// cut short.
///
/// Not thread-safe: one writer, one owner.
public final class AtomicFileWriter {
    public let path: String
    private let temporaryPath: String
    private var descriptor: Int32
    private var buffer: [UInt8] = []
    private let bufferCapacity: Int

    /// Creates the temporary file.
    ///
    /// - Parameter bufferBytes: what is gathered before a write (smaller for many files written side by side).
    /// - Throws: `JobError(.output)` naming the path when the folder cannot take a new file.
    public init(path: String, bufferBytes: Int = 1 << 20) throws(JobError) {
        self.path = path
        self.bufferCapacity = max(bufferBytes, 4096)
        self.temporaryPath = path + ".salvo-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
        self.descriptor = open(self.temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard self.descriptor >= 0 else {
            throw JobError(.output, "\(path): cannot create a file beside it: \(String(cString: strerror(errno)))")
        }
        self.buffer.reserveCapacity(self.bufferCapacity)
    }

    deinit {
        if self.descriptor >= 0 {
            close(self.descriptor)
            unlink(self.temporaryPath)
        }
    }

    /// Appends `bytes`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(JobError) {
        self.buffer.append(contentsOf: bytes)
        if self.buffer.count >= self.bufferCapacity { try self.drain() }
    }

    /// Appends `bytes` (an array, or a slice of one).
    public func write(_ bytes: some Collection<UInt8>) throws(JobError) {
        self.buffer.append(contentsOf: bytes)
        if self.buffer.count >= self.bufferCapacity { try self.drain() }
    }

    /// Appends `text` as UTF-8.
    public func write(_ text: String) throws(JobError) {
        self.buffer.append(contentsOf: text.utf8)
        if self.buffer.count >= self.bufferCapacity { try self.drain() }
    }

    /// Writes what is buffered, syncs, and renames the file over `path`.
    public func commit() throws(JobError) {
        try self.drain()
        guard fsync(self.descriptor) == 0 else { throw self.failure("cannot write the file") }
        // A network file system may report a failed write (ENOSPC, EIO, a quota) only here.
        let closed = close(self.descriptor)
        self.descriptor = -1
        guard closed == 0 else {
            let error = self.failure("cannot write the file")
            unlink(self.temporaryPath)
            throw error
        }
        guard rename(self.temporaryPath, self.path) == 0 else {
            let error = self.failure("cannot replace the file")
            unlink(self.temporaryPath)
            throw error
        }
    }

    private func drain() throws(JobError) {
        var offset = 0
        while offset < self.buffer.count {
            let written = self.buffer.withUnsafeBytes { all in
                systemWrite(self.descriptor, all.baseAddress! + offset, all.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw self.failure("cannot write the file")
            }
            offset += written
        }
        self.buffer.removeAll(keepingCapacity: true)
    }

    private func failure(_ what: String) -> JobError {
        JobError(.output, "\(self.path): \(what): \(String(cString: strerror(errno)))")
    }
}

/// `write(2)`, named apart from the writer's own `write` methods.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
