import Foundation
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// Checks output paths before anything is sent, and writes the results after.
///
/// Checked first because a path that cannot be written would otherwise fail the send after delivery, and the
/// user who runs it again sends duplicates; and an output that names an input file or another output would
/// silently replace it.
enum OutputFiles {
    static func check(_ outputs: SendOutputs, inputs: [String]) throws(JobError) {
        let named = outputs.named
        let inputPaths = Set(inputs.map(Self.canonical))
        var seen: [String: String] = [:]
        for (option, path) in named {
            let canonical = Self.canonical(path)
            if inputPaths.contains(canonical) {
                throw JobError(.output, "\(option) \(path) is an input file: it would be overwritten")
            }
            if let other = seen[canonical] {
                throw JobError(.output, "\(option) and \(other) both name \(path): one would overwrite the other")
            }
            seen[canonical] = option
            try Self.checkWritable(path, option: option)
        }
        // The suppression file is merged into after the send: one that cannot be read would fail it then.
        if let path = outputs.unregistered {
            do {
                _ = try SuppressionList.loadIfPresent(path: path)
            } catch {
                throw JobError(.output, "--unregistered \(error.description): fix the file or name another")
            }
        }
    }

    /// A path that exists must be a writable file; a new one needs a writable folder.
    private static func checkWritable(_ path: String, option: String) throws(JobError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard !isDirectory.boolValue else { throw JobError(.output, "\(option) \(path) is a folder") }
            guard access(path, W_OK) == 0 else {
                throw JobError(
                    .output,
                    "\(option) \(path): cannot write the file: \(String(cString: strerror(errno)))"
                )
            }
        } else {
            let folder = (path as NSString).deletingLastPathComponent
            let parent = folder.isEmpty ? "." : folder
            guard access(parent, W_OK | X_OK) == 0 else {
                throw JobError(
                    .output,
                    "\(option) \(path): cannot create the file in \(parent): \(String(cString: strerror(errno)))"
                )
            }
        }
    }

    /// The absolute, standardized form of a path (links resolved where the file exists).
    private static func canonical(_ path: String) -> String {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        return url.resolvingSymlinksInPath().path
    }

    /// Writes every output asked for, each whole or not at all, the report last: an output that cannot be written
    /// (a full disk, an I/O error) does not keep the others from being written, and the report names it.
    ///
    /// Each failure goes to `result.outputFailures` (the console names them; the exit status is 3) and, but for the
    /// report's own, to the report's `outputFailures`. A file that failed is removed from its path with any older
    /// file there, which would describe another run (a suppression file merged into keeps its earlier entries).
    ///
    /// With `gate`, every file made beside an output, every rename over one and every removal passes through it:
    /// once it is closed (the record was written without the job), nothing more reaches the paths.
    static func write(_ result: inout SendResult, to outputs: SendOutputs, gate: OutputGate? = nil) {
        // What an earlier step of the same result could not write (the outputs before a write-back) is kept.
        var failures: [OutputFailure] = result.outputFailures
        func attempt(_ output: String, _ path: String, rows: Int?, _ body: () throws(JobError) -> Void) {
            do throws(JobError) {
                try body()
            } catch {
                failures.append(
                    OutputFailure(output: output, path: path, error: Self.reason(error, path: path), rowsMissing: rows)
                )
                if output != "unregistered" {
                    if let gate { _ = try? gate.pass { unlink(path) } } else { unlink(path) }
                }
            }
        }
        if let path = outputs.rejects {
            let rows = result.inputRejects.count + result.rejectedRows.count
            attempt("rejects", path, rows: rows) { () throws(JobError) in
                try Self.writeRejects(result, to: path, gate: gate)
            }
        }
        if let path = outputs.unsettled {
            let rows = result.unsettledCount
            attempt("unsettled", path, rows: rows) { () throws(JobError) in
                try Self.writeUnsettled(result, to: path, gate: gate)
            }
        }
        if let path = outputs.unregistered {
            let rows = result.unregistered.count
            attempt("unregistered", path, rows: rows) { () throws(JobError) in
                // Merged in place by the list (read, then written whole): the whole merge passes the gate.
                if let gate {
                    try gate.passOrThrow(path) { () throws(JobError) in try Self.mergeUnregistered(result, into: path) }
                } else {
                    try Self.mergeUnregistered(result, into: path)
                }
            }
        }
        result.report.outputFailures = failures.isEmpty ? nil : failures
        if let path = outputs.report {
            attempt("report", path, rows: nil) { () throws(JobError) in
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data: Data
                do {
                    data = try encoder.encode(result.report)
                } catch {
                    throw JobError(.output, "\(path): cannot encode the report: \(error)")
                }
                try Self.write(data, to: path, gate: gate)
            }
        }
        result.outputFailures = failures
    }

    /// The error's message without the output's own path in front (the failure names it).
    private static func reason(_ error: JobError, path: String) -> String {
        let prefix = path + ": "
        return error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message
    }

    private static func writeRejects(_ result: SendResult, to path: String, gate: OutputGate?) throws(JobError) {
        let writer = try Self.writer(path, gate)
        try writer.write(RejectedRow.csvHeader + "\n")
        for reject in result.inputRejects {
            try writer.write(
                [reject.file, String(reject.line), reject.value, "", reject.reason].map(csvField)
                    .joined(separator: ",") + "\n"
            )
        }
        for row in result.rejectedRows { try writer.write(row.csvLine + "\n") }
        try Self.commit(writer, gate)
    }

    private static func writeUnsettled(_ result: SendResult, to path: String, gate: OutputGate?) throws(JobError) {
        var csv = UnsettledRow.csvHeader + "\n"
        for row in result.unsettledRows { csv += row.csvLine + "\n" }
        if let tail = result.unsettledTail, tail.count > 0 {
            try Self.write(csv, then: tail, to: path, gate: gate)
        } else {
            result.unsettledTail?.remove()
            try Self.write(Data(csv.utf8), to: path, gate: gate)
        }
    }

    private static func mergeUnregistered(_ result: SendResult, into path: String) throws(JobError) {
        let now = Int64(Date().timeIntervalSince1970)
        var list = SuppressionList()
        for token in result.unregistered {
            if let entry = token.suppressionEntry(now: now) { list.add(entry) }
        }
        try list.merge(into: path)
    }

    /// `text`, then the tail's spill file copied a MiB at a time (never whole in memory), written atomically. The
    /// spill is removed.
    private static func write(
        _ text: String,
        then tail: UnsettledTail,
        to path: String,
        gate: OutputGate?
    ) throws(JobError) {
        defer { tail.remove() }
        // The spill is renamed into place beside the output: through the gate as well (refused, it is removed).
        if let gate { try gate.passOrThrow(path) { tail.finish() } } else { tail.finish() }
        if let failure = tail.failure { throw JobError(.output, failure) }
        let writer = try Self.writer(path, gate)
        try writer.write(text)
        if let spill = tail.path {
            let input = open(spill, O_RDONLY | O_CLOEXEC)
            guard input >= 0 else {
                throw JobError(.output, "\(spill): cannot read: \(String(cString: strerror(errno)))")
            }
            defer { close(input) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else {
                    throw JobError(.output, "\(spill): cannot read: \(String(cString: strerror(errno)))")
                }
                if count == 0 { break }
                try writer.write(buffer[0..<count])
            }
        }
        try Self.commit(writer, gate)
    }

    private static func write(_ data: Data, to path: String, gate: OutputGate?) throws(JobError) {
        let writer = try Self.writer(path, gate)
        try writer.write(data)
        try Self.commit(writer, gate)
    }

    /// A writer for `path`, its temporary file made through `gate` (none once it is closed: nothing is left beside
    /// the path after the record without the job has cleared it).
    private static func writer(_ path: String, _ gate: OutputGate?) throws(JobError) -> AtomicFileWriter {
        guard let gate else { return try AtomicFileWriter(path: path) }
        var made: AtomicFileWriter?
        try gate.passOrThrow(path) { () throws(JobError) in made = try AtomicFileWriter(path: path) }
        guard let made else { throw OutputGate.closedError(path) }
        return made
    }

    /// Renames the writer's file over its path through `gate`.
    private static func commit(_ writer: AtomicFileWriter, _ gate: OutputGate?) throws(JobError) {
        guard let gate else { return try writer.commit() }
        try gate.passOrThrow(writer.path) { () throws(JobError) in try writer.commit() }
    }
}
