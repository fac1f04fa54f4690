import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A tmpfs of a few KB mounted on a fresh folder under `TestScratch`: a disk that fills up. Mounting needs root (or
/// CAP_SYS_ADMIN); where it is refused, the tests that need one are skipped with the reason `unavailable` gives.
/// The owner unmounts it (`defer { disk.unmount() }`), which also removes its folder.
public struct SmallFilesystem: Sendable {
    public let path: String

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Why a tmpfs cannot be mounted here (not root, no CAP_SYS_ADMIN in this container: EPERM), nil when it can:
    /// found once by mounting and unmounting one. The reason is printed, so a skipped test says why.
    public static let unavailable: String? = {
        do {
            try SmallFilesystem(bytes: 64 << 10).unmount()
            return nil
        } catch {
            let reason = "a tmpfs cannot be mounted here (\(error)): the full-disk tests are skipped"
            FileHandle.standardError.write(Data((reason + "\n").utf8))
            return reason
        }
    }()

    /// Mounts a tmpfs of `bytes` (rounded up to whole pages) on a fresh folder; the folder is removed when the mount
    /// is refused.
    public init(bytes: Int) throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-tmpfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let status: Int32
        let output: String
        do {
            (status, output) = try TestProcess.runToEnd(
                "/bin/mount",
                ["-t", "tmpfs", "-o", "size=\(bytes),mode=0777", "tmpfs", folder]
            )
        } catch {
            rmdir(folder)
            throw error
        }
        guard status == 0 else {
            rmdir(folder)
            throw Failure(description: "mount exited \(status): \(output)")
        }
        self.path = folder
    }

    /// Unmounts the tmpfs and removes its folder.
    public func unmount() {
        _ = try? TestProcess.runToEnd("/bin/umount", [self.path])
        rmdir(self.path)
    }

    /// Fills the tmpfs with a file named `filler` until `free` bytes are left.
    public func fill(leaving free: Int) throws {
        var status = statvfs()
        guard statvfs(self.path, &status) == 0 else { throw Failure(description: "statvfs \(self.path) failed") }
        let available = Int(status.f_bavail) * Int(status.f_frsize)
        try Data(count: max(0, available - free)).write(to: URL(fileURLWithPath: self.path + "/filler"))
    }
}
