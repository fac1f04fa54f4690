#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the process holds at one moment: resident memory (now and at its peak), open descriptors, threads and
/// CPU time. Read from `/proc/self` and `getrusage`; on a system without `/proc` the counts read 0.
public struct ProcessSample: Codable, Hashable, Sendable {
    /// Resident memory now, in bytes (`VmRSS`).
    public var residentBytes: Int
    /// The most resident memory so far, in bytes (`VmHWM`).
    public var peakResidentBytes: Int
    /// Open file descriptors (entries of `/proc/self/fd`).
    public var openDescriptors: Int
    public var threads: Int
    /// User and system CPU seconds used by the process so far.
    public var cpuSeconds: Double

    public init(residentBytes: Int, peakResidentBytes: Int, openDescriptors: Int, threads: Int, cpuSeconds: Double) {
        self.residentBytes = residentBytes
        self.peakResidentBytes = peakResidentBytes
        self.openDescriptors = openDescriptors
        self.threads = threads
        self.cpuSeconds = cpuSeconds
    }

    /// Samples this process.
    public static func now() -> ProcessSample {
        var sample = ProcessSample(
            residentBytes: 0,
            peakResidentBytes: 0,
            openDescriptors: 0,
            threads: 0,
            cpuSeconds: 0
        )
        if let status = Self.readText("/proc/self/status") {
            for line in status.split(separator: "\n") {
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 2, let value = Int(fields[1]) else { continue }
                switch fields[0] {
                case "VmRSS:": sample.residentBytes = value * 1024
                case "VmHWM:": sample.peakResidentBytes = value * 1024
                case "Threads:": sample.threads = value
                default: break
                }
            }
        }
        sample.openDescriptors = Self.countDescriptors()
        var usage = rusage()
        if getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 {
            sample.cpuSeconds =
                Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
                + Double(usage.ru_stime.tv_usec) / 1e6
        }
        return sample
    }

    private static func countDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { $0.first ?? 0 }
            if name != UInt8(ascii: ".") { count += 1 }
        }
        // The descriptor `opendir` itself holds is not the process's own.
        return max(0, count - 1)
    }

    private static func readText(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }
}
