import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one way the tests start a child process: the built `salvo`, a system tool (`psql`, `mount`, a browser), or
/// `/bin/sh -c` for a shell pipe.
///
/// Its output goes into files under `TestScratch` (read when asked, so a long run never fills a pipe), or, where the
/// test is about a pipe, into a pipe drained by a thread of its own with `read(2)` (retrying EINTR: Foundation's
/// `readDataToEndOfFile` ends the test process on an interrupted read). Every wait for its end is bounded: past its
/// bound the child is killed and reaped, and the wait throws `Overrun`, which a test records as an issue. A run that
/// is let go while still running (a test that threw before its wait) is killed and reaped too.
///
/// Not for a program that leaves a daemon behind (`pg_ctl start`): Foundation's `Process` did not see such a child
/// end while the daemon lived.
public final class TestProcess: Sendable {
    /// Where standard input comes from.
    public enum Input: Sendable {
        /// This process's standard input (what `Process` does by default).
        case inherited
        /// `/dev/null`.
        case nothing
        /// A file, opened for reading.
        case file(URL)
        /// A pipe fed `Data` from a thread of its own and then closed; a child that exits without reading it all
        /// ends the feed (EPIPE), not the test process (SIGPIPE is ignored).
        case pipe(Data)
        /// A descriptor the caller holds open (a pseudo-terminal's follower), by a handle.
        case handle(FileHandle)
    }

    /// Where standard output and standard error go.
    public enum Output: Sendable {
        /// Both into one file: `output`.
        case together
        /// Each into a file of its own: `standardOutput` and `standardError` (`output` is both, output first).
        case apart
        /// Standard output into a file, standard error dropped.
        case standardOutputOnly
        /// Standard error into a file, standard output dropped.
        case standardErrorOnly
        /// Both dropped.
        case nothing
        /// Both into one pipe, drained as the child writes (for a test about what the child does with a pipe).
        case pipe
        /// Standard output into a descriptor the caller holds and reads itself (a pipe's write end, which the caller
        /// closes once the child has started); standard error stays this process's.
        case handle(FileHandle)
    }

    /// A wait that passed its bound: the child was killed.
    public struct Overrun: Error, CustomStringConvertible {
        public let description: String
    }

    /// A child that could not be started, or a reap that did not come.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let process: Process
    /// `executable arguments…`, for messages.
    public let commandLine: String
    private let outputFile: URL?
    private let errorFile: URL?
    private let drained: Drain?
    private let mode: Output
    /// Its end, as `Process` reports it (waited for without polling).
    private let ending = Ending()

    /// `salvo`: the one `SALVO_TEST_SALVO` names, else the one built next to the test bundle by `swift build`; nil
    /// when it is not there.
    public static var salvoPath: String? {
        if let named = ProcessInfo.processInfo.environment["SALVO_TEST_SALVO"], !named.isEmpty {
            return FileManager.default.isExecutableFile(atPath: named) ? named : nil
        }
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = folder.appendingPathComponent("salvo").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        return nil
    }

    /// Why a test that runs `salvo` cannot pass here: it is not built next to the tests.
    public static var salvoMissing: String { "salvo is not built next to the tests (\(CommandLine.arguments[0]))" }

    /// The folder the output files go into (under `TestScratch`, so removed with it).
    private static let outputFolder: URL = {
        let folder = TestScratch.root.appendingPathComponent("process-output")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }()

    // MARK: Starting

    /// Starts `executable` with `arguments`, in `folder` when given (else this process's working folder), with
    /// `environment` added to this process's.
    public init(
        _ executable: String,
        _ arguments: [String],
        in folder: URL? = nil,
        environment: [String: String] = [:],
        input: Input = .inherited,
        output: Output = .together
    ) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let folder { process.currentDirectoryURL = folder }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        self.commandLine =
            ([URL(fileURLWithPath: executable).lastPathComponent] + arguments.prefix(6))
            .joined(separator: " ") + (arguments.count > 6 ? " …" : "")

        // Standard output and error.
        var opened: [FileHandle] = []
        func file(_ name: String) throws -> (URL, FileHandle) {
            let url = Self.outputFolder.appendingPathComponent("\(name)-\(UUID().uuidString).txt")
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw Failure(description: "cannot create \(url.path)")
            }
            let handle = try FileHandle(forWritingTo: url)
            opened.append(handle)
            return (url, handle)
        }
        var outputFile: URL?
        var errorFile: URL?
        var pipe: Pipe?
        switch output {
        case .together:
            let (url, handle) = try file("output")
            outputFile = url
            process.standardOutput = handle
            process.standardError = handle
        case .apart:
            let (out, outHandle) = try file("stdout")
            let (err, errHandle) = try file("stderr")
            outputFile = out
            errorFile = err
            process.standardOutput = outHandle
            process.standardError = errHandle
        case .standardOutputOnly:
            let (url, handle) = try file("stdout")
            outputFile = url
            process.standardOutput = handle
            process.standardError = FileHandle.nullDevice
        case .standardErrorOnly:
            let (url, handle) = try file("stderr")
            errorFile = url
            process.standardOutput = FileHandle.nullDevice
            process.standardError = handle
        case .nothing:
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
        case .pipe:
            let both = Pipe()
            pipe = both
            process.standardOutput = both
            process.standardError = both
        case .handle(let handle):
            process.standardOutput = handle
        }
        self.outputFile = outputFile
        self.errorFile = errorFile
        self.mode = output

        // Standard input.
        var feed: (Pipe, Data)?
        switch input {
        case .inherited:
            break
        case .nothing:
            process.standardInput = FileHandle.nullDevice
        case .file(let url):
            let handle = try FileHandle(forReadingFrom: url)
            opened.append(handle)
            process.standardInput = handle
        case .pipe(let data):
            // A child that exits without reading its pipe must not end the test process with SIGPIPE.
            Glibc.signal(SIGPIPE, SIG_IGN)
            let inputPipe = Pipe()
            feed = (inputPipe, data)
            process.standardInput = inputPipe
        case .handle(let handle):
            process.standardInput = handle
        }

        self.process = process
        let ending = self.ending
        process.terminationHandler = { _ in ending.ended() }
        do {
            try process.run()
        } catch {
            for handle in opened { try? handle.close() }
            throw Failure(description: "\(self.commandLine): cannot start it (\(error))")
        }
        // The child has its own copies now.
        for handle in opened { try? handle.close() }
        if let (inputPipe, data) = feed {
            // The child holds the read end: with this one closed, a child that exits unread fails the write.
            try? inputPipe.fileHandleForReading.close()
            Self.feed(inputPipe.fileHandleForWriting, data)
        }
        if let pipe {
            try? pipe.fileHandleForWriting.close()
            self.drained = Drain(pipe.fileHandleForReading)
        } else {
            self.drained = nil
        }
    }

    /// Writes `data` to `handle` from a thread of its own (the pipe holds less than the input, which the child reads
    /// as it goes), retrying EINTR, and closes it; a write the child no longer reads (EPIPE) ends the feed.
    private static func feed(_ handle: FileHandle, _ data: Data) {
        let thread = Thread {
            let descriptor = handle.fileDescriptor
            data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                var offset = 0
                while offset < bytes.count {
                    let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        break
                    }
                    offset += written
                }
            }
            try? handle.close()
        }
        thread.start()
    }

    deinit {
        // Let go while running (a test that threw before its wait): not left behind.
        if !self.ending.hasEnded {
            Glibc.kill(self.process.processIdentifier, SIGKILL)
            _ = self.ending.waitBlocking(seconds: 30)
        }
    }

    // MARK: Running

    public var processIdentifier: pid_t { self.process.processIdentifier }
    public var isRunning: Bool { self.process.isRunning }
    /// Its exit status (or the number of the signal that ended it); only once it has ended.
    public var status: Int32 { self.process.terminationStatus }
    public var reason: Process.TerminationReason { self.process.terminationReason }

    /// Sends `signal` to the child (SIGINT, SIGTERM, SIGKILL…); nothing once it has ended and been reaped.
    public func signal(_ signal: Int32) {
        guard self.process.isRunning else { return }
        Glibc.kill(self.process.processIdentifier, signal)
    }

    /// Whether the child catches `signal` now (the `SigCgt` mask of its `/proc` status). A child that watches for a
    /// signal through Dispatch catches it once the watch is registered, so a test that sends it that signal waits for
    /// this first, instead of pausing for a time a loaded machine may not keep.
    public func catches(_ signal: Int32) -> Bool {
        guard
            let status = try? String(contentsOfFile: "/proc/\(self.process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
            let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (UInt64(1) << UInt64(signal - 1)) != 0
    }

    /// Whether the child holds `path` open now (a descriptor of its `/proc` entry leads there): a wait on a file's lock
    /// has begun once the file is open.
    public func holdsOpen(_ path: String) -> Bool {
        let folder = "/proc/\(self.process.processIdentifier)/fd"
        let wanted = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return false }
        return descriptors.contains { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + descriptor)) == wanted
        }
    }

    /// Kills the child (SIGKILL) and waits for its reaping (bounded: it cannot outlive a SIGKILL by much).
    public func kill() async throws {
        self.signal(SIGKILL)
        _ = try await self.wait(seconds: 30)
    }

    /// Waits at most `seconds` for the child to end; its exit status. Past the bound it is killed and `Overrun` is
    /// thrown, with the end of what it printed.
    @discardableResult
    public func wait(seconds: Double) async throws -> Int32 {
        let ended = await self.ending.wait(seconds: seconds)
        return try await self.ended(ended, within: seconds)
    }

    /// `wait(seconds:)`, blocking this thread: only for a synchronous caller outside a test's body (the benchmarks'
    /// reference receiver, in a command that cannot suspend). A test awaits `wait(seconds:)`.
    @discardableResult
    public func waitBlocking(seconds: Double) throws -> Int32 {
        guard self.ending.waitBlocking(seconds: seconds) else {
            Glibc.kill(self.process.processIdentifier, SIGKILL)
            _ = self.ending.waitBlocking(seconds: 30)
            throw Overrun(
                description: "\(self.commandLine) did not end within \(seconds) s, so it was killed; it printed:\n"
                    + self.output.suffix(2000)
            )
        }
        self.drained?.finishBlocking()
        return self.process.terminationStatus
    }

    private func ended(_ ended: Bool, within seconds: Double) async throws -> Int32 {
        if !ended {
            Glibc.kill(self.process.processIdentifier, SIGKILL)
            _ = await self.ending.wait(seconds: 30)
            throw Overrun(
                description: "\(self.commandLine) did not end within \(seconds) s, so it was killed; it printed:\n"
                    + self.output.suffix(2000)
            )
        }
        await self.drained?.finish()
        return self.process.terminationStatus
    }

    // MARK: What it printed

    private static func contents(_ file: URL?) -> String {
        guard let file else { return "" }
        return (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    }

    /// Everything kept of what it printed so far: both streams (standard output first, for `.apart`).
    public var output: String {
        if let drained { return String(decoding: drained.bytes, as: UTF8.self) }
        if case .together = self.mode { return Self.contents(self.outputFile) }
        return Self.contents(self.outputFile) + Self.contents(self.errorFile)
    }

    /// The bytes of `output` as written (for a test about the bytes themselves).
    public var outputBytes: [UInt8] {
        if let drained { return drained.bytes }
        return Array(self.output.utf8)
    }

    /// What it wrote to standard output so far (both streams for `.together` and `.pipe`).
    public var standardOutput: String {
        if self.drained != nil { return self.output }
        return Self.contents(self.outputFile)
    }

    /// What it wrote to standard error so far (both streams for `.together` and `.pipe`).
    public var standardError: String {
        if self.drained != nil { return self.output }
        if case .together = self.mode { return Self.contents(self.outputFile) }
        return Self.contents(self.errorFile)
    }

    // MARK: Runs to the end

    /// `run`, blocking this thread: only for a synchronous caller outside a test's body (the benchmarks' build of the
    /// reference program, a fixture's set-up or tear-down that cannot suspend). A test awaits `run`.
    public static func runToEnd(
        _ executable: String,
        _ arguments: [String],
        in folder: URL? = nil,
        environment: [String: String] = [:],
        input: Input = .inherited,
        output: Output = .together,
        seconds: Double = 120
    ) throws -> (status: Int32, output: String) {
        let run = try TestProcess(
            executable,
            arguments,
            in: folder,
            environment: environment,
            input: input,
            output: output
        )
        let status = try run.waitBlocking(seconds: seconds)
        return (status, run.output)
    }

    /// Runs to the end, waiting at most `seconds` without holding a thread (then killed, with `Overrun` thrown): its
    /// exit status and what it printed (`output`: both streams unless told otherwise).
    public static func run(
        _ executable: String,
        _ arguments: [String],
        in folder: URL? = nil,
        environment: [String: String] = [:],
        input: Input = .inherited,
        output: Output = .together,
        seconds: Double = 120
    ) async throws -> (status: Int32, output: String) {
        let run = try TestProcess(
            executable,
            arguments,
            in: folder,
            environment: environment,
            input: input,
            output: output
        )
        let status = try await run.wait(seconds: seconds)
        return (status, run.output)
    }
}

/// A child's end, told by `Process`'s termination handler, waited for by tasks without holding a thread, and by a
/// synchronous caller (`waitBlocking`, the deinit after its kill) blocking; each wait bounded.
private final class Ending: Sendable {
    private struct State {
        var ended = false
        var next = 0
        var waiting: [Int: CheckedContinuation<Bool, Never>] = [:]
    }

    private let state = Mutex(State())
    private let blocking = DispatchSemaphore(value: 0)

    var hasEnded: Bool { self.state.withLock { $0.ended } }

    /// The child ended and was reaped.
    func ended() {
        let waiting = self.state.withLock { state in
            state.ended = true
            defer { state.waiting.removeAll() }
            return state.waiting.values
        }
        for continuation in waiting { continuation.resume(returning: true) }
        self.blocking.signal()
    }

    /// Whether the child ended within `seconds`.
    func wait(seconds: Double) async -> Bool {
        let id = self.state.withLock { state in
            state.next += 1
            return state.next
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let ended = self.state.withLock { state in
                if !state.ended { state.waiting[id] = continuation }
                return state.ended
            }
            if ended { return continuation.resume(returning: true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0, seconds)) {
                self.state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(returning: false)
            }
        }
    }

    /// `wait(seconds:)`, blocking this thread.
    func waitBlocking(seconds: Double) -> Bool {
        if self.hasEnded { return true }
        guard self.blocking.wait(timeout: .now() + max(0, seconds)) == .success else { return self.hasEnded }
        // Passed on to the next thread that waits.
        self.blocking.signal()
        return true
    }
}

/// A pipe read to its end by a thread of its own with `read(2)`, EINTR retried; its end waited for by tasks without
/// holding a thread.
private final class Drain: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var done = false
        var next = 0
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())
    private let handle: FileHandle
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        self.handle = handle
        let descriptor = handle.fileDescriptor
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                self.state.withLock { $0.bytes.append(contentsOf: chunk[0..<count]) }
            }
            let waiting = self.state.withLock { state in
                state.done = true
                defer { state.waiting.removeAll() }
                return state.waiting.values
            }
            for continuation in waiting { continuation.resume() }
            self.done.signal()
        }
        thread.start()
    }

    var bytes: [UInt8] { self.state.withLock { $0.bytes } }

    /// Waits (5 s at most: a grandchild may hold the pipe open) for the end of the pipe after the child ended.
    func finish() async {
        let id = self.state.withLock { state in
            state.next += 1
            return state.next
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = self.state.withLock { state in
                if !state.done { state.waiting[id] = continuation }
                return state.done
            }
            if done { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
                self.state.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
            }
        }
    }

    /// `finish`, blocking this thread (for `runToEnd`).
    func finishBlocking() {
        if self.done.wait(timeout: .now() + 5) == .success { self.done.signal() }
    }
}
