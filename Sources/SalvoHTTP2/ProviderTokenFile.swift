import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A provider token that another process keeps fresh in a file (`salvo token mint --out FILE`, or a Kubernetes
/// Secret mounted as a file and refreshed by a CronJob): every connection of the job sends it, and the job never
/// signs one of its own, so a fleet of workers sends one token per key.
///
/// The file is opened by path on every read and never kept open: Kubernetes replaces a mounted Secret by swapping a
/// symlink, so a kept descriptor would go on reading the old token. The decisions (when to look, whether a token is
/// too old, what to do after `ExpiredProviderToken`) are `ProviderTokenFileMonitor`'s; this class only stats and
/// reads the file under a lock, at most every few seconds, so a connection's batch of requests rarely pays for more
/// than a look at the clock.
///
/// Thread-safe. The clock (UNIX seconds) is injected.
public final class ProviderTokenFile: Sendable {
    /// The file.
    public let path: String
    private let clock: @Sendable () -> Int64
    private let warn: @Sendable (String) -> Void
    private let monitor: NIOLockedValueBox<ProviderTokenFileMonitor>

    /// Reads the file and checks its token.
    ///
    /// - Parameters:
    ///   - clock: the current UNIX time in seconds.
    ///   - warn: called (outside any lock) with a message when the token grows old with no newer one in the file,
    ///     or when a change to the file cannot be used; never with the token.
    /// - Throws: `HTTP2ClientError(.credentials)` naming the file when it is missing, unreadable or malformed, or
    ///   its token is an hour old or more.
    public init(
        path: String,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        warn: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(HTTP2ClientError) {
        let now = clock()
        guard let stamp = Self.stamp(path) else {
            throw HTTP2ClientError(
                .credentials,
                "cannot read the provider token file \(path): \(String(cString: strerror(errno)))"
            )
        }
        let contents = try Self.read(path).get()
        self.path = path
        self.clock = clock
        self.warn = warn
        self.monitor = NIOLockedValueBox(
            try ProviderTokenFileMonitor(path: path, contents: contents, stamp: stamp, now: now)
        )
    }

    /// The token to send now; the file is looked at when `checkInterval` has passed since the last look.
    public func current() -> ProviderToken.Bearer {
        let now = self.clock()
        var notes: [String] = []
        let bearer = self.monitor.withLockedValue { monitor in
            if monitor.shouldLook(now: now) { self.look(&monitor, now: now, notes: &notes) }
            if let warning = monitor.warning(now: now) { notes.append(warning) }
            return monitor.current.bearer
        }
        for note in notes { self.warn(note) }
        return bearer
    }

    /// After `ExpiredProviderToken` for `rejected`: looks at the file at once, and says whether a newer token is
    /// there to send again with.
    public func renew(after rejected: ProviderToken.Bearer) -> ProviderToken.Renewal {
        let now = self.clock()
        var notes: [String] = []
        let renewal = self.monitor.withLockedValue { monitor in
            self.look(&monitor, now: now, notes: &notes)
            return monitor.renewal(after: rejected, now: now)
        }
        for note in notes { self.warn(note) }
        return renewal
    }

    /// How many times a newer token from the file replaced the current one.
    public var replacements: Int { self.monitor.withLockedValue { $0.replacements } }

    private func look(_ monitor: inout ProviderTokenFileMonitor, now: Int64, notes: inout [String]) {
        let stamp = Self.stamp(self.path)
        guard monitor.looked(stamp, now: now) == .read, let stamp else { return }
        if case .kept(let reason) = monitor.read(Self.read(self.path), stamp: stamp, now: now) {
            notes.append(reason)
        }
    }

    /// The file's identity as `stat` (following symlinks) sees it; nil when it cannot be stat'ed.
    static func stamp(_ path: String) -> ProviderTokenFileMonitor.Stamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return ProviderTokenFileMonitor.Stamp(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        )
    }

    /// Opens the file by path, reads it whole (64 KiB at most: a token file is a few hundred bytes) and closes it.
    static func read(_ path: String) -> Result<ProviderTokenFileContents, HTTP2ClientError> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            return .failure(
                HTTP2ClientError(
                    .credentials,
                    "cannot read the provider token file \(path): \(String(cString: strerror(errno)))"
                )
            )
        }
        defer { close(descriptor) }
        let limit = 64 * 1024
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count <= limit {
            let got = bytes.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress! + count, limit + 1 - count)
            }
            if got < 0 {
                if errno == EINTR { continue }
                return .failure(
                    HTTP2ClientError(
                        .credentials,
                        "cannot read the provider token file \(path): \(String(cString: strerror(errno)))"
                    )
                )
            }
            if got == 0 { break }
            count += got
        }
        guard count <= limit else {
            return .failure(HTTP2ClientError(.credentials, "\(path) is not a provider token file (over 64 KiB)"))
        }
        return Result { () throws(HTTP2ClientError) in
            try ProviderTokenFileContents(parsing: Array(bytes[..<count]), path: path)
        }
    }

    /// Writes `contents` to `path` whole or not at all: a temporary file beside it (mode 0600, synced) renamed over
    /// it, so a reader sees the old file or the new one, never part of one.
    ///
    /// - Throws: `HTTP2ClientError(.configuration)` naming the path when the folder cannot take the file.
    public static func write(_ contents: ProviderTokenFileContents, to path: String) throws(HTTP2ClientError) {
        func failure(_ what: String) -> HTTP2ClientError {
            HTTP2ClientError(.configuration, "\(path): \(what): \(String(cString: strerror(errno)))")
        }
        let temporary = path + ".salvo-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot create a file beside it") }
        let bytes = contents.encoded
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let error = failure("cannot write the file")
                close(descriptor)
                unlink(temporary)
                throw error
            }
            offset += written
        }
        // The mode is set again: the umask may have taken bits off, never added any, but be exact.
        guard fchmod(descriptor, 0o600) == 0, fsync(descriptor) == 0 else {
            let error = failure("cannot write the file")
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let error = failure("cannot replace the file")
            unlink(temporary)
            throw error
        }
    }
}
