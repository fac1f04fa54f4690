import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One folder per test (or benchmark) process for the files it writes (token lists, reports, journals, the shared
/// certificates), removed when the process exits; a folder left by a test process that is gone (a crash, a kill) is removed when the next
/// one starts. So a run of the suite leaves nothing in the temporary directory.
public enum TestScratch {
    private static let prefix = "salvo-tests-"

    public static let root: URL = {
        let temporary = FileManager.default.temporaryDirectory
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
            }
        }
        let folder = temporary.appendingPathComponent(prefix + String(getpid()))
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            fatalError("cannot make the tests' folder \(folder.path): \(error)")
        }
        scratchToRemove = folder.path
        atexit {
            if let folder = scratchToRemove { try? FileManager.default.removeItem(atPath: folder) }
        }
        return folder
    }()

    /// `root` as a path.
    public static var path: String { root.path }
}

/// What the exit handler removes (a C function pointer captures nothing).
nonisolated(unsafe) private var scratchToRemove: String?

extension TestScratch {
    /// A new folder under the root, named `prefix` and a UUID.
    public static func newFolder(_ prefix: String) throws -> String {
        let folder = Self.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.path
    }
}
