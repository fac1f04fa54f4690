import SalvoRows
import SalvoService

#if canImport(Glibc)
import Glibc
#endif

/// The files of the campaigns in the store's folder: `campaigns/ID/` holds a campaign's uploaded audience
/// (`audience.csv`) or its query's rows (`postgres.csv`), its template (`template.json`), its journal (`journal/`, `send --journal`'s folder) and the
/// files its runs write in the formats of `send` (`report.json`, `rejects.csv`, `unsettled.csv`,
/// `unregistered.csv`). An upload is written to `campaigns/incoming/` first and moved into its campaign's folder only
/// once whole and checked, so that a folder exists only for a campaign that does. Every call blocks (file I/O,
/// `fsync`): the caller runs it on `BlockingWork`.
public struct CampaignFolder: Sendable {
    /// `STORE/campaigns`.
    public let root: String

    public init(store: String) {
        self.root = store + "/campaigns"
    }

    public var incoming: String { self.root + "/incoming" }

    public func folder(_ id: String) -> String { self.root + "/" + id }
    public func audience(_ id: String) -> String { self.folder(id) + "/audience.csv" }
    /// The snapshot of a query's rows (`CampaignQuery`), taken at the campaign's first run.
    public func query(_ id: String) -> String { self.folder(id) + "/postgres.csv" }
    public func template(_ id: String) -> String { self.folder(id) + "/template.json" }
    public func journal(_ id: String) -> String { self.folder(id) + "/journal" }
    public func report(_ id: String) -> String { self.folder(id) + "/report.json" }
    public func rejects(_ id: String) -> String { self.folder(id) + "/rejects.csv" }
    public func unsettled(_ id: String) -> String { self.folder(id) + "/unsettled.csv" }
    public func unregistered(_ id: String) -> String { self.folder(id) + "/unregistered.csv" }

    /// The bytes an unprivileged writer may still put on the file system that holds the campaigns (`statvfs`), nil
    /// when it cannot be read.
    public func freeBytes() -> Int? {
        var status = statvfs()
        guard statvfs(self.root, &status) == 0 else { return nil }
        let (bytes, overflow) = Int(clamping: status.f_bavail).multipliedReportingOverflow(
            by: Int(clamping: status.f_frsize)
        )
        return overflow ? .max : bytes
    }

    /// Creates the folders (once, at the start) and removes what a stopped service left half-made: uploads that
    /// never became campaigns, and campaign folders whose campaign was never recorded (`known`).
    public func prepare(known: Set<String>) throws(StoreFailure) {
        for folder in [self.root, self.incoming] {
            guard mkdir(folder, 0o700) == 0 || errno == EEXIST else {
                throw StoreFailure("\(folder): cannot create the folder: \(String(cString: strerror(errno)))")
            }
        }
        for name in Self.list(self.incoming) { unlink(self.incoming + "/" + name) }
        for name in Self.list(self.root) where name != "incoming" && !known.contains(name) {
            Self.remove(self.root + "/" + name)
        }
    }

    /// Makes a new campaign's folder, moving its upload in (when it has one) and writing its template; synced, so a
    /// campaign recorded afterwards finds its files after a crash.
    public func create(_ id: String, upload: String?, template: [UInt8]?) throws(StoreFailure) {
        let folder = self.folder(id)
        guard mkdir(folder, 0o700) == 0 else {
            throw StoreFailure("\(folder): cannot create the campaign's folder: \(String(cString: strerror(errno)))")
        }
        if let upload {
            guard rename(upload, self.audience(id)) == 0 else {
                throw StoreFailure("\(folder): cannot move the upload in: \(String(cString: strerror(errno)))")
            }
        }
        if let template {
            let writer: AtomicFileWriter
            do throws(JobError) {
                writer = try AtomicFileWriter(path: self.template(id))
                try writer.write(template)
                try writer.commit()
            } catch {
                throw StoreFailure(error.message)
            }
        }
        Self.sync(folder)
        Self.sync(self.root)
    }

    /// Removes a campaign's folder (a campaign that could not be recorded).
    public func remove(_ id: String) {
        Self.remove(self.folder(id))
    }

    /// The contents of a result file of the campaign, nil when its runs have not written it.
    /// What tells one version of a file from another without reading it: its size and its time of change
    /// (nanoseconds); nil when there is no such file.
    public static func signature(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    }

    public static func contents(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    /// A server-side audience file named by a request: resolved under `allowed` (links followed), a regular file
    /// that can be read. Nothing outside `allowed` is ever opened.
    ///
    /// - Returns: the file's resolved path, or the reason it cannot be the audience.
    public static func resolve(_ path: String, allowed: String?) -> Result<String, FieldError> {
        guard let allowed else {
            return .failure(
                FieldError(
                    field: "audience.file",
                    reason: "this service takes no server-side audience files (salvo serve --campaign-files DIR)"
                )
            )
        }
        guard let base = Self.realPath(allowed) else {
            return .failure(FieldError(field: "audience.file", reason: "the campaign files' folder cannot be read"))
        }
        let joined = path.hasPrefix("/") ? path : base + "/" + path
        guard let resolved = Self.realPath(joined) else {
            return .failure(FieldError(field: "audience.file", reason: "no such file under the campaign files' folder"))
        }
        guard resolved.hasPrefix(base + "/") else {
            return .failure(
                FieldError(field: "audience.file", reason: "the file is outside the campaign files' folder")
            )
        }
        var status = stat()
        guard stat(resolved, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, access(resolved, R_OK) == 0 else {
            return .failure(FieldError(field: "audience.file", reason: "not a file that can be read"))
        }
        return .success(resolved)
    }

    // MARK: Pieces

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func list(_ folder: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func remove(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        if (status.st_mode & S_IFMT) == S_IFDIR {
            for name in Self.list(path) { Self.remove(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    static func sync(_ folder: String) {
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}

/// An uploaded audience being written to `campaigns/incoming/`: the body's chunks as they come (each write on
/// `BlockingWork`), synced at the end. Dropped before `finish` (the upload stopped midway), the file is removed.
public final class CampaignUpload: Sendable {
    public let path: String
    private let descriptor: Int32

    /// The most bytes gathered before a write.
    static let writeBytes = 1 << 20

    /// - Throws: `StoreFailure` when the file cannot be made.
    public static func begin(in folder: CampaignFolder, id: String) async throws(StoreFailure) -> CampaignUpload {
        let path = folder.incoming + "/" + id + ".csv"
        let (descriptor, error) = await BlockingWork.run {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            return (descriptor, descriptor < 0 ? String(cString: strerror(errno)) : "")
        }
        guard descriptor >= 0 else { throw StoreFailure("\(path): cannot write the upload: \(error)") }
        return CampaignUpload(path: path, descriptor: descriptor)
    }

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Appends `bytes` to the file.
    public func write(_ bytes: [UInt8]) async throws(StoreFailure) {
        let descriptor = self.descriptor
        let path = self.path
        let failure = await BlockingWork.run { () -> String? in
            bytes.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> String? in
                var offset = 0
                while offset < buffer.count {
                    let count = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return String(cString: strerror(errno)) }
                    offset += count
                }
                return nil
            }
        }
        if let failure { throw StoreFailure("\(path): cannot write the upload: \(failure)") }
    }

    /// Syncs and closes the file: it is whole on the disk.
    public func finish() async throws(StoreFailure) {
        let descriptor = self.descriptor
        let path = self.path
        try await BlockingWork.run { () throws(StoreFailure) in
            guard fsync(descriptor) == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw StoreFailure("\(path): cannot sync the upload: \(reason)")
            }
            close(descriptor)
        }
    }

    /// Closes and removes the file (the upload stopped, or was refused).
    public func discard() async {
        let descriptor = self.descriptor
        let path = self.path
        await BlockingWork.run {
            close(descriptor)
            unlink(path)
        }
    }
}
