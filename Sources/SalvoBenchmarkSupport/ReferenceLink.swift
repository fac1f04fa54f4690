import Foundation
import SalvoTestSupport

/// The reference link: a C sender and receiver (`Benchmarks/reference`, OpenSSL and liburing) that measure what this
/// host's TLS link carries for binary-interface frames, with nothing of a real job on the path. Its rate is the
/// limit `salvo-bench send` reports each of its rows against, measured in the same run, so that a ratio means the
/// same on any host where the absolute rates do not.
///
/// The programs are not part of the product: they are built from their sources with `cc` on first use (into
/// `.build/reference` of the checkout) and run as child processes.
public struct ReferenceLink: Sendable {
    /// The built programs.
    public var sender: String
    public var receiver: String

    /// The folder of the C sources: `Benchmarks/reference` of the checkout this file was compiled from, else of the
    /// current folder or one above it.
    public static func sourceFolder() -> String? {
        var candidates: [URL] = []
        // Sources/SalvoBenchmarkSupport/ReferenceLink.swift → the checkout.
        let file = URL(fileURLWithPath: #filePath)
        candidates.append(file.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent())
        var folder = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        for _ in 0..<6 {
            candidates.append(folder)
            folder = folder.deletingLastPathComponent()
        }
        for candidate in candidates {
            let path = candidate.appendingPathComponent("Benchmarks/reference").path
            if FileManager.default.fileExists(atPath: path + "/reference-sender.c") { return path }
        }
        return nil
    }

    /// The programs, built with `cc -O2` where missing or older than their sources.
    ///
    /// - Parameter sources: the folder of `reference-sender.c` and `reference-receiver.c` (default: `sourceFolder()`).
    public static func prepare(sources: String? = nil) throws(ReferenceLinkError) -> ReferenceLink {
        guard let sources = sources ?? Self.sourceFolder() else {
            throw ReferenceLinkError(
                "cannot find Benchmarks/reference/reference-sender.c: run from the Salvo checkout, or name the "
                    + "folder with --reference-dir"
            )
        }
        for name in ["reference-sender.c", "reference-receiver.c"]
        where !FileManager.default.fileExists(atPath: sources + "/" + name) {
            throw ReferenceLinkError("\(sources) holds no \(name): is it Benchmarks/reference of a Salvo checkout?")
        }
        // <checkout>/Benchmarks/reference → <checkout>/.build/reference
        let checkout = URL(fileURLWithPath: sources).deletingLastPathComponent().deletingLastPathComponent()
        let output = checkout.appendingPathComponent(".build/reference").path
        do {
            try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        } catch {
            throw ReferenceLinkError("cannot make \(output): \(error)")
        }
        var link = ReferenceLink(sender: "", receiver: "")
        for name in ["reference-sender", "reference-receiver"] {
            let source = sources + "/\(name).c"
            let binary = output + "/\(name)"
            if Self.modified(binary) == nil || Self.modified(binary)! < (Self.modified(source) ?? .distantFuture) {
                try Self.compile(source, into: binary)
            }
            if name == "reference-sender" { link.sender = binary } else { link.receiver = binary }
        }
        return link
    }

    /// Measures the limit: the sender's `frames` frames of `frameBytes` over `connections` connections to a fresh
    /// receiver, which must count every one of them. Blocks until both programs are done.
    public func measure(
        frames: Int,
        connections: Int,
        frameBytes: Int,
        certificate: String,
        key: String
    ) throws(ReferenceLinkError) -> Limit {
        let receiver = try ReferenceReceiver.start(self, certificate: certificate, key: key)
        let sent: [String: String]
        do {
            sent = try Self.run(
                self.sender,
                [
                    "--port", String(receiver.port), "--frames", String(frames), "--connections", String(connections),
                    "--frame-bytes", String(frameBytes),
                ],
                line: "sender"
            )
        } catch {
            _ = try? receiver.stop()
            throw error
        }
        let received = try receiver.stop()
        guard received.frames == frames, received.invalid == 0 else {
            throw ReferenceLinkError(
                "the reference receiver counted \(received.frames) frames (\(received.invalid) invalid) of the "
                    + "\(frames) the reference sender sent"
            )
        }
        return Limit(
            frames: frames,
            connections: connections,
            frameBytes: frameBytes,
            seconds: Double(sent["seconds"] ?? "") ?? 0,
            senderUserSeconds: Double(sent["user"] ?? "") ?? 0,
            senderSystemSeconds: Double(sent["sys"] ?? "") ?? 0,
            receiver: received
        )
    }

    /// One measurement of the reference link.
    public struct Limit: Sendable {
        public var frames: Int
        public var connections: Int
        public var frameBytes: Int
        /// From every connection's handshake done to the last barrier's answer.
        public var seconds: Double
        /// The sender's CPU seconds over that time.
        public var senderUserSeconds: Double
        public var senderSystemSeconds: Double
        /// What the receiver counted, and its CPU.
        public var receiver: ReferenceReceiver.Counts

        public var framesPerSecond: Double { self.seconds > 0 ? Double(self.frames) / self.seconds : 0 }
    }

    static func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    static func compile(_ source: String, into binary: String) throws(ReferenceLinkError) {
        // Built beside, then renamed: two benchmarks starting at once never run a half-written program.
        let partial = binary + ".\(getpid())"
        let arguments = ["cc", "-O2", "-Wall", "-o", partial, source, "-luring", "-lssl", "-lcrypto", "-lpthread"]
        let status: Int32
        let output: String
        do {
            (status, output) = try TestProcess.runToEnd("/usr/bin/env", arguments, input: .nothing, seconds: 600)
        } catch {
            throw ReferenceLinkError("cannot run cc to build \(binary): \(error)")
        }
        guard status == 0, rename(partial, binary) == 0 else {
            unlink(partial)
            throw ReferenceLinkError(
                "`\(arguments.joined(separator: " "))` failed (status \(status)); it needs a C compiler, libssl-dev "
                    + "and liburing-dev:\n" + output.suffix(2000)
            )
        }
    }

    /// Runs `program` to its end and returns the `key=value` fields of its output line that starts with `line`.
    static func run(
        _ program: String,
        _ arguments: [String],
        line: String
    ) throws(ReferenceLinkError) -> [String:
        String]
    {
        let status: Int32
        let text: String
        do {
            (status, text) = try TestProcess.runToEnd(program, arguments, input: .nothing, output: .apart, seconds: 600)
        } catch {
            throw ReferenceLinkError("cannot run \(program) to its end: \(error)")
        }
        guard status == 0, let fields = Self.fields(text, line: line) else {
            throw ReferenceLinkError(
                "\(program) \(arguments.joined(separator: " ")) failed (status \(status)):\n\(text)"
            )
        }
        return fields
    }

    /// The `key=value` fields of the first line of `text` that starts with `line`.
    static func fields(_ text: String, line: String) -> [String: String]? {
        guard let found = text.split(separator: "\n").first(where: { $0.hasPrefix(line + " ") }) else { return nil }
        var fields: [String: String] = [:]
        for word in found.split(separator: " ").dropFirst() {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }
}

/// The reference receiver as a child process, on a free port of 127.0.0.1: it decrypts and walks every frame and
/// answers barriers, so `salvo send` can send to it as to a gateway that accepts everything.
public final class ReferenceReceiver: @unchecked Sendable {
    /// The port it listens on.
    public let port: Int
    private let process: TestProcess
    private let input: Pipe
    private let output: Pipe

    /// What it counted, from its start to its stop.
    public struct Counts: Sendable {
        public var frames: Int
        public var bytes: Int
        public var barriers: Int
        public var invalid: Int
        public var connections: Int
        /// The receiver's own CPU seconds.
        public var userSeconds: Double
        public var systemSeconds: Double
    }

    private init(port: Int, process: TestProcess, input: Pipe, output: Pipe) {
        self.port = port
        self.process = process
        self.input = input
        self.output = output
    }

    /// Starts the receiver with the server certificate and key (PEM) and waits for its port.
    public static func start(
        _ link: ReferenceLink,
        certificate: String,
        key: String
    ) throws(ReferenceLinkError) -> ReferenceReceiver {
        // It stops when its standard input ends: when `stop` closes it, or when this process exits by any way.
        let input = Pipe()
        let output = Pipe()
        let process: TestProcess
        do {
            process = try TestProcess(
                link.receiver,
                ["--cert", certificate, "--key", key, "--port", "0", "--stdin-control"],
                input: .handle(input.fileHandleForReading),
                output: .handle(output.fileHandleForWriting)
            )
        } catch {
            throw ReferenceLinkError("cannot run \(link.receiver): \(error)")
        }
        // The child holds its own ends: the output ends when it exits.
        try? input.fileHandleForReading.close()
        try? output.fileHandleForWriting.close()
        // The first line, `listening 127.0.0.1 PORT`; an end of output first means it failed (it said why).
        var first = Data()
        while !first.contains(UInt8(ascii: "\n")) {
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { break }
            first.append(more)
        }
        let words = String(decoding: first, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count >= 3, words[0] == "listening", let port = Int(words[2]) else {
            let status = try? process.waitBlocking(seconds: 30)
            throw ReferenceLinkError("\(link.receiver) did not start (status \(status.map(String.init) ?? "unknown"))")
        }
        return ReferenceReceiver(port: port, process: process, input: input, output: output)
    }

    /// Stops the receiver and returns what it counted.
    public func stop() throws(ReferenceLinkError) -> Counts {
        try? self.input.fileHandleForWriting.close()
        let text = String(decoding: self.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        do {
            _ = try self.process.waitBlocking(seconds: 30)
        } catch {
            throw ReferenceLinkError("the reference receiver did not stop: \(error)")
        }
        guard let fields = ReferenceLink.fields(text, line: "receiver") else {
            throw ReferenceLinkError("the reference receiver ended without its counts")
        }
        func int(_ key: String) -> Int { Int(fields[key] ?? "") ?? 0 }
        return Counts(
            frames: int("frames"),
            bytes: int("bytes"),
            barriers: int("barriers"),
            invalid: int("invalid"),
            connections: int("connections"),
            userSeconds: Double(fields["user"] ?? "") ?? 0,
            systemSeconds: Double(fields["sys"] ?? "") ?? 0
        )
    }
}

/// The reference link could not be built or run.
public struct ReferenceLinkError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
