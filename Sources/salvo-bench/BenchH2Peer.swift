import Dispatch
import Foundation
import NIOConcurrencyHelpers
import SalvoConsole

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The reference HTTP/2 client Salvo is measured against (`Benchmarks/peer`): Go's own HTTP/2 transport
/// (golang.org/x/net/http2, the one under sideshow/apns2), one client, 5,000 goroutines, a transport that dials
/// another connection whenever the open ones are at the server's stream limit. Built offline from Debian's
/// `golang-go` and `golang-golang-x-net-dev`, run as a child process, and measured from outside as a user's
/// clock sees it: wall time from spawn to exit, and the child's own CPU time and peak memory (`wait4`).
enum H2Peer {
    /// How the peer authenticates.
    enum Authentication: Sendable {
        /// A client certificate and its key (PEM files).
        case certificate(certificate: String, key: String)
        /// A provider token (the JWT itself); handed to the peer in a file readable by the owner only.
        case providerToken(String)
        /// A provider token file as `salvo token mint --out` writes it (or a file with the JWT alone).
        case providerTokenFile(String)
    }

    /// One run's inputs.
    struct Options: Sendable {
        /// HOST:PORT of the HTTP/2 endpoint.
        var gateway: String
        /// The name the server's certificate must carry (nil: the host).
        var serverName: String?
        /// CA certificates (PEM) to trust for the server (nil: the system's).
        var certificateAuthorities: String?
        /// A CSV of hex device tokens with a `token` column (or tokens alone); one request per row.
        var tokenFile: String
        /// The JSON payload, the same for every row.
        var payloadFile: String
        var topic: String
        var pushType = "alert"
        var authentication: Authentication
        /// Requests in flight: one goroutine each.
        var goroutines = 5000
        /// The child is killed (and the run fails) after this long.
        var timeLimitSeconds = 600.0

        init(
            gateway: String,
            serverName: String? = nil,
            certificateAuthorities: String? = nil,
            tokenFile: String,
            payloadFile: String,
            topic: String,
            authentication: Authentication
        ) {
            self.gateway = gateway
            self.serverName = serverName
            self.certificateAuthorities = certificateAuthorities
            self.tokenFile = tokenFile
            self.payloadFile = payloadFile
            self.topic = topic
            self.authentication = authentication
        }
    }

    /// What the peer reported (its JSON line) and what the process cost, seen from outside.
    struct Result: Sendable {
        /// Rows a request was made for, rows answered 200, and the other answers by reason (`transport: …` for a
        /// request without an answer).
        var sent: Int
        var ok: Int
        var failed: [String: Int]
        /// Connections the transport dialled.
        var connections: Int
        /// Requests sent again because the connection they needed could not be dialled (they never left), and
        /// requests the transport replayed after the server refused them unprocessed.
        var dialRetries: Int
        var transportReplays: Int
        /// The peer's own clock, from the start of its main to its line.
        var peerWallSeconds: Double
        /// From spawn to exit.
        var wallSeconds: Double
        var userCPUSeconds: Double
        var systemCPUSeconds: Double
        var peakResidentMiB: Double
        /// The peer's exit status: 0 every row answered 200, 1 some row not.
        var exitStatus: Int32

        /// Delivered ÷ wall time of the whole process.
        var rate: Double { self.wallSeconds > 0 ? Double(self.ok) / self.wallSeconds : 0 }
        var cpuSeconds: Double { self.userCPUSeconds + self.systemCPUSeconds }
    }

    /// The peer's sources: `SALVO_PEER_SOURCE`, else `Benchmarks/peer` of the tree this file was built from.
    static var sourceFolder: String {
        if let folder = ProcessInfo.processInfo.environment["SALVO_PEER_SOURCE"], !folder.isEmpty { return folder }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Benchmarks/peer").path
    }

    /// The executable `salvo-h2-peer` in `buildFolder`, built there by `build.sh` when it is missing or older than
    /// its sources.
    static func executable(buildFolder: String, sourceFolder: String = H2Peer.sourceFolder) async throws -> String {
        let executable = buildFolder + "/salvo-h2-peer"
        let sources = ["main.go", "build.sh"].map { sourceFolder + "/" + $0 }
        let built = modificationTime(executable)
        let newestSource = sources.compactMap(modificationTime).max()
        if let built, newestSource.map({ built >= $0 }) ?? true { return executable }
        guard newestSource != nil else {
            throw UserError("\(sourceFolder): no peer sources (main.go, build.sh); set SALVO_PEER_SOURCE")
        }
        try FileManager.default.createDirectory(atPath: buildFolder, withIntermediateDirectories: true)
        let output = buildFolder + "/build.log"
        let outcome = try await ChildProcess.run(
            ["/bin/sh", sourceFolder + "/build.sh", buildFolder],
            standardOutput: output,
            standardError: output,
            timeLimitSeconds: 600
        )
        guard outcome.exitStatus == 0, modificationTime(executable) != nil else {
            let log = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            throw UserError("building the peer failed (\(outcome.describedEnd)):\n\(log)")
        }
        return executable
    }

    /// Builds the peer into `buildFolder` if needed and runs it once.
    static func run(_ options: Options, buildFolder: String) async throws -> Result {
        try await self.run(options, executable: try await self.executable(buildFolder: buildFolder))
    }

    /// Runs the peer once against `options.gateway` and reads its line.
    static func run(_ options: Options, executable: String) async throws -> Result {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("salvo-h2-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(
            atPath: folder,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        defer { try? FileManager.default.removeItem(atPath: folder) }

        var arguments = [
            executable, "-tokens", options.tokenFile, "-payload", options.payloadFile, "-topic", options.topic,
            "-push-type", options.pushType, "-gateway", options.gateway, "-goroutines", String(options.goroutines),
        ]
        if let serverName = options.serverName { arguments += ["-server-name", serverName] }
        if let authorities = options.certificateAuthorities { arguments += ["-ca", authorities] }
        switch options.authentication {
        case .certificate(let certificate, let key):
            arguments += ["-cert", certificate, "-key", key]
        case .providerToken(let token):
            // In a file, not on the command line, where any process could read it.
            let tokenFile = folder + "/provider-token"
            guard FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8)),
                chmod(tokenFile, 0o600) == 0
            else { throw UserError("\(tokenFile): cannot write the provider token") }
            arguments += ["-provider-token-file", tokenFile]
        case .providerTokenFile(let path):
            arguments += ["-provider-token-file", path]
        }

        let standardOutput = folder + "/stdout"
        let standardError = folder + "/stderr"
        let outcome = try await ChildProcess.run(
            arguments,
            standardOutput: standardOutput,
            standardError: standardError,
            timeLimitSeconds: options.timeLimitSeconds
        )
        let output = (try? String(contentsOfFile: standardOutput, encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOfFile: standardError, encoding: .utf8)) ?? ""
        guard outcome.exitStatus == 0 || outcome.exitStatus == 1,
            let line = output.split(separator: "\n").last,
            let report = try? JSONDecoder().decode(Report.self, from: Data(line.utf8))
        else {
            throw UserError(
                "the peer \(outcome.describedEnd) without a result"
                    + (errors.isEmpty ? "" : ": " + errors.trimmingCharacters(in: .whitespacesAndNewlines))
            )
        }
        return Result(
            sent: report.sent,
            ok: report.ok,
            failed: report.failed,
            connections: report.connections,
            dialRetries: report.dialRetries,
            transportReplays: report.transportReplays,
            peerWallSeconds: report.wallSeconds,
            wallSeconds: outcome.wallSeconds,
            userCPUSeconds: outcome.userCPUSeconds,
            systemCPUSeconds: outcome.systemCPUSeconds,
            peakResidentMiB: outcome.peakResidentMiB,
            exitStatus: outcome.exitStatus ?? -1
        )
    }

    /// The peer's JSON line.
    private struct Report: Decodable {
        var sent: Int
        var ok: Int
        var failed: [String: Int]
        var wallSeconds: Double
        var connections: Int
        var dialRetries: Int
        var transportReplays: Int
    }

    private static func modificationTime(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }
}

/// A child process measured from outside: wall time from spawn to exit, its CPU time and peak memory from `wait4`
/// (its own, not every child's, as `RUSAGE_CHILDREN` would be). Waits on a thread of its own, never the
/// cooperative pool's, and kills the child once `timeLimitSeconds` have passed.
enum ChildProcess {
    struct Outcome: Sendable {
        /// The exit status; nil when a signal ended the child.
        var exitStatus: Int32?
        var signal: Int32?
        /// Killed for running past its time limit.
        var timedOut: Bool
        var wallSeconds: Double
        var userCPUSeconds: Double
        var systemCPUSeconds: Double
        var peakResidentMiB: Double

        /// `exited with status 3`, `was ended by signal 9`, `ran past its 600 s limit`.
        var describedEnd: String {
            if self.timedOut { return "ran past its time limit" }
            if let status = self.exitStatus { return "exited with status \(status)" }
            return "was ended by signal \(self.signal ?? 0)"
        }
    }

    /// Runs `arguments` (the first is the executable's path) with standard input from /dev/null and standard
    /// output and error into the given files (created or truncated, mode 0600; the same path for both appends
    /// both to one file).
    static func run(
        _ arguments: [String],
        standardOutput: String,
        standardError: String,
        timeLimitSeconds: Double
    ) async throws -> Outcome {
        precondition(!arguments.isEmpty)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if standardError == standardOutput {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, standardError, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        defer {
            for argument in argv { free(argument) }
        }
        var pid = pid_t()
        let start = DispatchTime.now().uptimeNanoseconds
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw UserError("\(arguments[0]): cannot start it (\(String(cString: strerror(spawned))))")
        }
        let child = pid
        // The child stays unreaped until `exited` is set, so the time limit can never signal a reused pid.
        let state = NIOLockedValueBox((exited: false, timedOut: false))
        DispatchQueue.global().asyncAfter(deadline: .now() + timeLimitSeconds) {
            state.withLockedValue { state in
                guard !state.exited else { return }
                state.timedOut = true
                kill(child, SIGKILL)
            }
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let waiter = Thread {
                var information = siginfo_t()
                while waitid(P_PID, id_t(child), &information, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
                let end = DispatchTime.now().uptimeNanoseconds
                let timedOut = state.withLockedValue { state in
                    state.exited = true
                    return state.timedOut
                }
                var status: Int32 = 0
                var usage = rusage()
                while wait4(child, &status, 0, &usage) < 0 && errno == EINTR {}
                let signaled = (status & 0x7f) != 0
                continuation.resume(
                    returning: Outcome(
                        exitStatus: signaled ? nil : (status >> 8) & 0xff,
                        signal: signaled ? status & 0x7f : nil,
                        timedOut: timedOut,
                        wallSeconds: Double(end - start) / 1e9,
                        userCPUSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6,
                        systemCPUSeconds: Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6,
                        peakResidentMiB: Double(usage.ru_maxrss) / 1024
                    )
                )
            }
            waiter.start()
        }
    }
}
