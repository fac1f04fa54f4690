import Foundation

/// The CPU time of a process and of its children, read from Linux's `/proc`: what a server of many processes (a
/// PostgreSQL postmaster and its backends) has spent so far. The process's own time, the time of the children it has
/// waited for (`cutime`, `cstime`: a backend that ended still counts), and the time of its children alive now; the
/// difference of two readings is what the server spent between them, whichever of its processes came and went.
public enum ProcessTreeCPU {
    /// The fields of `/proc/PID/stat` it reads, in clock ticks.
    public struct Stat: Hashable, Sendable {
        public var parent: Int32
        public var user: Int64
        public var system: Int64
        public var childrenUser: Int64
        public var childrenSystem: Int64

        public init(parent: Int32, user: Int64, system: Int64, childrenUser: Int64, childrenSystem: Int64) {
            self.parent = parent
            self.user = user
            self.system = system
            self.childrenUser = childrenUser
            self.childrenSystem = childrenSystem
        }
    }

    /// Reads a `/proc/PID/stat` line. The command name (field 2) is in parentheses and may hold spaces and
    /// parentheses of its own: the fields that follow are counted from its last `)`.
    public static func parse(stat line: String) -> Stat? {
        guard let close = line.lastIndex(of: ")") else { return nil }
        // Fields 3 on: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime,
        // stime, cutime, cstime.
        let fields = line[line.index(after: close)...].split(separator: " ")
        guard fields.count >= 15, let parent = Int32(fields[1]), let user = Int64(fields[11]),
            let system = Int64(fields[12]), let childrenUser = Int64(fields[13]), let childrenSystem = Int64(fields[14])
        else { return nil }
        return Stat(
            parent: parent,
            user: user,
            system: system,
            childrenUser: childrenUser,
            childrenSystem: childrenSystem
        )
    }

    /// The sum over `root` (with its reaped children) and its living children, in ticks; nil when `root` cannot be
    /// read.
    public static func ticks(root: Int32, in stats: [Int32: Stat]) -> Int64? {
        guard let own = stats[root] else { return nil }
        var total = own.user + own.system + own.childrenUser + own.childrenSystem
        for stat in stats.values where stat.parent == root {
            total += stat.user + stat.system + stat.childrenUser + stat.childrenSystem
        }
        return total
    }

    /// CPU seconds of `root` and its children now; nil when `/proc` does not have it.
    public static func seconds(root: Int32) -> Double? {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        return Self.ticks(root: root, in: Self.readAll()).map { Double($0) / ticksPerSecond }
    }

    /// The postmaster of a PostgreSQL backend on this machine: its parent, when that is a `postgres` process.
    public static func postmaster(ofBackend backend: Int32) -> Int32? {
        guard let stat = Self.read(backend), stat.parent > 1 else { return nil }
        let name = (try? String(contentsOfFile: "/proc/\(stat.parent)/comm", encoding: .utf8)) ?? ""
        return name.hasPrefix("postgres") || name.hasPrefix("postmaster") ? stat.parent : nil
    }

    private static func read(_ pid: Int32) -> Stat? {
        (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)).flatMap(Self.parse(stat:))
    }

    /// Every process's stat now (a process that ends while the folder is read is left out).
    private static func readAll() -> [Int32: Stat] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var stats: [Int32: Stat] = [:]
        for name in names {
            guard let pid = Int32(name), let stat = Self.read(pid) else { continue }
            stats[pid] = stat
        }
        return stats
    }
}
