import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real proxy on a loopback port for the tests, a child process with a throwaway configuration: Debian's
/// `tinyproxy` (HTTP CONNECT, Basic authentication) or `danted` (SOCKS5, with or without RFC 1929's username method,
/// which Dante checks against the system's users: `.ci/run` makes one and exports `SALVO_TEST_SOCKS_USER` and
/// `SALVO_TEST_SOCKS_PASSWORD`). Stopped by `stop()` or when released.
public final class ProxyServer: @unchecked Sendable {
    public enum Kind: Sendable {
        case tinyproxy
        case dante
    }

    public let kind: Kind
    public let port: Int
    /// The user the proxy asks for, and its password; nil when it asks for none.
    public let user: (name: String, password: String)?
    private let folder: URL
    private let configuration: URL
    /// The running proxy's process id; nil once it was reaped.
    private var pid: pid_t?

    /// Where Debian installs the two.
    public static let tinyproxyPath = "/usr/bin/tinyproxy"
    public static let dantedPath = "/usr/sbin/danted"

    /// Whether both programs are here, or the run requires them (`SALVO_TEST_PROXIES=required`, set by `.ci/run`,
    /// where a missing program fails the tests instead of skipping them).
    public static var isAvailable: Bool {
        let required = ProcessInfo.processInfo.environment["SALVO_TEST_PROXIES"] == "required"
        let present = [Self.tinyproxyPath, Self.dantedPath].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        return present || required
    }

    /// A child's environment with the machine's own proxy variables blanked, so that each run of a command uses only
    /// the proxy it names; `extra` is laid over it.
    public static func cleanEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
        [
            "HTTPS_PROXY": "", "https_proxy": "", "ALL_PROXY": "", "all_proxy": "", "NO_PROXY": "", "no_proxy": "",
        ].merging(extra) { $1 }
    }

    /// The system user Dante's username method accepts (`.ci/run` makes it), or nil.
    public static var socksUser: (name: String, password: String)? {
        let environment = ProcessInfo.processInfo.environment
        guard let name = environment["SALVO_TEST_SOCKS_USER"], let password = environment["SALVO_TEST_SOCKS_PASSWORD"],
            !name.isEmpty, !password.isEmpty
        else { return nil }
        return (name, password)
    }

    /// Starts tinyproxy on a free port.
    ///
    /// - Parameters:
    ///   - user: the Basic credentials it asks for (nil: none).
    ///   - connectPorts: the only ports it opens tunnels to (nil: any); others are refused with 403.
    public static func tinyproxy(
        user: (name: String, password: String)?,
        connectPorts: [Int]? = nil
    ) async throws -> ProxyServer {
        let server = try ProxyServer(kind: .tinyproxy, user: user) { port, folder in
            var lines = [
                "Port \(port)", "Listen 127.0.0.1", "Timeout 60", "MaxClients 200", "Allow 127.0.0.1",
                "LogLevel Info", "LogFile \"\(folder.path)/proxy.log\"", "DisableViaHeader Yes",
            ]
            if let user { lines.append("BasicAuth \(user.name) \(user.password)") }
            for connectPort in connectPorts ?? [] { lines.append("ConnectPort \(connectPort)") }
            return lines.joined(separator: "\n") + "\n"
        }
        try await server.start()
        return server
    }

    /// Starts danted on a free port.
    ///
    /// - Parameters:
    ///   - user: the system user its username method accepts (`socksUser`); nil for no authentication.
    ///   - refusedPorts: ports on 127.0.0.1 it refuses to connect to (SOCKS5 reply 2).
    public static func dante(
        user: (name: String, password: String)?,
        refusedPorts: [Int] = []
    ) async throws -> ProxyServer {
        let server = try ProxyServer(kind: .dante, user: user) { port, folder in
            var lines = [
                "logoutput: \(folder.path)/proxy.log",
                "internal: 127.0.0.1 port = \(port)",
                "external: 127.0.0.1",
                "socksmethod: \(user == nil ? "none" : "username")",
                "clientmethod: none",
            ]
            // As root, Dante reads the system's passwords as root and runs its children as nobody; otherwise it runs
            // as the user it is. Settings come before the rules.
            if getuid() == 0 { lines += ["user.privileged: root", "user.unprivileged: nobody"] }
            lines.append("client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }")
            for refused in refusedPorts {
                lines.append("socks block { from: 0.0.0.0/0 to: 127.0.0.1/32 port = \(refused) }")
            }
            lines.append("socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 command: connect }")
            return lines.joined(separator: "\n") + "\n"
        }
        try await server.start()
        return server
    }

    private init(
        kind: Kind,
        user: (name: String, password: String)?,
        configuration text: (Int, URL) -> String
    ) throws {
        self.kind = kind
        self.user = user
        self.folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: self.folder, withIntermediateDirectories: true)
        // Dante runs its children as `nobody`, which must reach the log.
        chmod(self.folder.path, 0o777)
        self.configuration = self.folder.appendingPathComponent("proxy.conf")
        let closed = try ClosedPort()
        self.port = closed.port
        closed.close()
        try text(self.port, self.folder).write(to: self.configuration, atomically: true, encoding: .utf8)
    }

    /// The proxy's URL, with the password unless `password` is false.
    public func url(user: (name: String, password: String)? = nil, password: Bool = true) -> String {
        let scheme = self.kind == .tinyproxy ? "http" : "socks5"
        guard let user = user ?? self.user else { return "\(scheme)://127.0.0.1:\(self.port)" }
        return "\(scheme)://\(user.name)\(password ? ":\(user.password)" : "")@127.0.0.1:\(self.port)"
    }

    /// What the proxy logged.
    public var log: String {
        (try? String(contentsOf: self.folder.appendingPathComponent("proxy.log"), encoding: .utf8)) ?? ""
    }

    /// The process's id while it runs.
    public var processIdentifier: Int32? { self.pid }

    /// Starts the proxy (again, on the same port after `kill`), and returns when it accepts connections (10 s at
    /// most). The wait looks every 20 ms, suspended between looks: nothing tells this process when another one begins
    /// to listen.
    ///
    /// Spawned and reaped here, not through Foundation's `Process`: danted closes every descriptor it inherited,
    /// among them the socket by which `Process` watches for a child's end, whose monitor thread then waits for
    /// danted's exit and reaps no other child meanwhile (every `salvo` a test runs).
    public func start() async throws {
        let (path, arguments) =
            switch self.kind {
            case .tinyproxy: (Self.tinyproxyPath, ["-d", "-c", self.configuration.path])
            case .dante:
                (
                    Self.dantedPath,
                    ["-f", self.configuration.path, "-p", self.folder.appendingPathComponent("pid").path]
                )
            }
        let output = self.folder.appendingPathComponent("output.log")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process's (another child's pipes, sockets) goes to the proxy.
        Self.closeFrom(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw ProxyServerError(message: "cannot start \(path): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let descriptor = LoopbackSocket.connect(port: self.port) {
                close(descriptor)
                return
            }
            guard self.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        self.kill()
        throw ProxyServerError(
            message: "\(self.kind) did not listen on 127.0.0.1:\(self.port) within 10 s: \(printed)\(self.log)"
        )
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift does not import (it is behind
    /// `_GNU_SOURCE`): looked up by name.
    private static func closeFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
    }

    /// Whether the proxy still runs (it is reaped when it has ended).
    private var isRunning: Bool {
        guard let pid = self.pid else { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == 0 else {
            self.pid = nil
            return false
        }
        return true
    }

    /// Kills the proxy at once (SIGKILL: no goodbye on its tunnels, as a crash or an OOM kill) and reaps it.
    public func kill() {
        guard let pid = self.pid else { return }
        self.pid = nil
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        // Dante's children end when their mother is gone; they are not this process's to reap.
    }

    /// Stops the proxy (SIGKILL: the test is done with it, and tinyproxy may not end on SIGTERM while it has clients)
    /// and removes its folder.
    public func remove() {
        self.kill()
        try? FileManager.default.removeItem(at: self.folder)
    }

    deinit { self.remove() }
}

public struct ProxyServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { self.message }
}
