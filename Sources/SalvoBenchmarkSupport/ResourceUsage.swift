import Foundation
import NIOCore
import NIOPosix

/// CPU time and resident memory for `salvo-bench`: of the whole process, and of the threads of an event loop
/// group (the client's own, apart from a simulator in the same process).
public enum ResourceUsage {
    /// User and system CPU seconds of the whole process (`getrusage(RUSAGE_SELF)`).
    public static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Self.seconds(usage.ru_utime) + Self.seconds(usage.ru_stime)
    }

    /// CPU seconds the threads of `group` have used so far (`CLOCK_THREAD_CPUTIME_ID`, read on each loop).
    public static func cpuSeconds(of group: MultiThreadedEventLoopGroup) async throws -> Double {
        var total = 0.0
        for loop in group.makeIterator() {
            total += try await loop.submit { Self.threadCPUSeconds() }.get()
        }
        return total
    }

    /// Restarts the process's peak resident set (Linux: `/proc/self/clear_refs`), so that the next
    /// `peakResidentMiB` is the peak since now. Does nothing where that file is missing.
    public static func resetPeakResident() {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return }
        handle.write(Data("5".utf8))
        try? handle.close()
    }

    /// The process's peak resident set in MiB: `VmHWM` of `/proc/self/status`, else `ru_maxrss` (the peak since the
    /// process started).
    public static func peakResidentMiB() -> Double {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        {
            return kilobytes / 1024
        }
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_maxrss) / 1024
    }

    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private static func seconds(_ value: timeval) -> Double {
        Double(value.tv_sec) + Double(value.tv_usec) / 1e6
    }
}
