import Foundation

extension JournalLock {
    /// Why the volume of the journal in `directory` cannot keep a second run out, nil when it can. An NFS mount
    /// with `nolock` (or `local_lock=` other than `none`) grants locks on the node that asks, without the server:
    /// each node of a cluster would hold the "same" lock at once, and the lock call succeeds, so the mount's
    /// options are read (from `/proc/self/mountinfo`: once a run).
    package static func volumeProblem(directory: String) -> String? {
        guard let mounts = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        let resolved = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        return Self.localLockProblem(mountInfo: mounts, path: resolved)
    }

    /// Why the mount that holds `path` (as `/proc/self/mountinfo` lists mounts) locks on this node alone, nil when
    /// it locks through its server or is not NFS. Pure, for tests.
    package static func localLockProblem(mountInfo: String, path: String) -> String? {
        var best: (point: String, options: [String])?
        for line in mountInfo.split(separator: "\n") {
            // id parent major:minor root mount-point options [optional…] - type source super-options
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let fields = halves[0].split(separator: " ")
            let tail = halves[1].split(separator: " ")
            guard fields.count >= 6, tail.count >= 1 else { continue }
            let point = Self.unescapedMountPath(String(fields[4]))
            guard path == point || path.hasPrefix(point == "/" ? "/" : point + "/") else { continue }
            guard best == nil || point.count > best!.point.count else { continue }
            let options =
                fields[5].split(separator: ",").map(String.init)
                + (tail.count >= 3 ? tail[2].split(separator: ",").map(String.init) : [])
            best = (point, tail[0].hasPrefix("nfs") ? options : [])
        }
        // The innermost mount decides (options of another file system are not looked at).
        guard let best, !best.options.isEmpty else { return nil }
        if best.options.contains("nolock") {
            return "the NFS mount \(best.point) has `nolock`: its locks are this node's alone"
        }
        if let local = best.options.first(where: { $0.hasPrefix("local_lock=") }), local != "local_lock=none" {
            return "the NFS mount \(best.point) has `\(local)`: its locks are this node's alone"
        }
        return nil
    }

    /// A mount point as mountinfo writes it: space, tab, newline and backslash as octal escapes.
    private static func unescapedMountPath(_ field: String) -> String {
        field.replacingOccurrences(of: "\\040", with: " ").replacingOccurrences(of: "\\011", with: "\t")
            .replacingOccurrences(of: "\\012", with: "\n").replacingOccurrences(of: "\\134", with: "\\")
    }
}
