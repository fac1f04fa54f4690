import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL server on loopback for the tests: the one `.ci/run` started (`SALVO_TEST_POSTGRES_URL`, a
/// superuser's URL with its password), else a throwaway cluster this process starts once (initdb into a temporary
/// folder, `pg_ctl start` on a free loopback port, stopped and removed when the process exits), so that `swift test`
/// alone works wherever PostgreSQL is installed. Each test takes a database of its own (`makeDatabase`), so tests run
/// in parallel.
///
/// The cluster asks for a password over TCP (scram-sha-256), so that a wrong password is refused as on a real server.
/// Run as root, initdb and the server run as the `postgres` user (initdb refuses root).
public final class PostgresTestServer: Sendable {
    /// A superuser's URL, password included: `postgres://USER:PASSWORD@127.0.0.1:PORT/postgres?sslmode=disable`.
    public let url: String
    public let host: String
    public let port: Int
    public let user: String
    public let password: String
    /// `psql`, to load tables and change them between runs.
    public let psql: String

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The server of this test process: found or started on first use.
    ///
    /// - Throws: `Failure` saying what is missing when neither `SALVO_TEST_POSTGRES_URL` is set nor a cluster could be
    ///   started here.
    public static func shared() throws -> PostgresTestServer {
        try Self.lock.withLock {
            if let server = Self.started { return server }
            let server = try Self.findOrStart()
            Self.started = server
            return server
        }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: PostgresTestServer?

    init(url: String, psql: String) throws {
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user
        else {
            throw Failure("SALVO_TEST_POSTGRES_URL=\(url) is not postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
        self.url = url
        self.host = host
        self.port = components.port ?? 5432
        self.user = user
        self.password = components.password ?? ""
        self.psql = psql
    }

    /// The URL of `database`, with `password` instead of the real one when given, and `sslmode` (default `disable`).
    public func url(database: String, password: String? = nil, sslmode: String = "disable") -> String {
        "postgres://\(self.user):\(password ?? self.password)@\(self.host):\(self.port)/\(database)?sslmode=\(sslmode)"
    }

    /// The URL of `database` without a password (given apart: `PGPASSWORD`, a password file).
    public func urlWithoutPassword(database: String, sslmode: String = "disable") -> String {
        "postgres://\(self.user)@\(self.host):\(self.port)/\(database)?sslmode=\(sslmode)"
    }

    /// A new, empty database named from `prefix`; its name.
    public func makeDatabase(_ prefix: String) async throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())".filter {
            $0.isLetter || $0.isNumber || $0 == "_"
        }
        _ = try await self.run("CREATE DATABASE \(name)", database: "postgres")
        return name
    }

    /// Runs `sql` (one or more statements; psql's backslash commands too) in `database`; what it printed, unaligned
    /// and without headers (`psql -At`).
    ///
    /// - Throws: `Failure` with psql's error when a statement fails.
    @discardableResult
    public func run(_ sql: String, database: String) async throws -> String {
        // Bounded: a connect that gets no answer gives up after 10 s, a statement after 120 s (the psql run then ends
        // with its error, read below), so no test waits on a server gone quiet.
        let run = try TestProcess(
            self.psql,
            ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(database: database), "-c", sql],
            environment: ["PGCONNECT_TIMEOUT": "10", "PGOPTIONS": "-c statement_timeout=120s"],
            input: .nothing,
            output: .apart
        )
        let status = try await run.wait(seconds: 180)
        let printed = run.standardOutput
        guard status == 0 else {
            throw Failure("psql \(sql.prefix(200)): exit \(status): \(run.standardError)")
        }
        return printed
    }

    // MARK: Finding or starting one

    private static func findOrStart() throws -> PostgresTestServer {
        let psql = Self.binary("psql")
        if let url = ProcessInfo.processInfo.environment["SALVO_TEST_POSTGRES_URL"], !url.isEmpty {
            guard let psql else { throw Failure("SALVO_TEST_POSTGRES_URL is set but psql is not installed") }
            return try PostgresTestServer(url: url, psql: psql)
        }
        guard let psql, let initdb = Self.binary("initdb"), let pgctl = Self.binary("pg_ctl") else {
            throw Failure(
                "no PostgreSQL server for the tests: set SALVO_TEST_POSTGRES_URL (as .ci/run does), or install "
                    + "PostgreSQL (initdb, pg_ctl and psql on PATH or in /usr/lib/postgresql/*/bin; Debian: "
                    + "apt-get install postgresql)"
            )
        }
        return try Self.startCluster(initdb: initdb, pgctl: pgctl, psql: psql)
    }

    /// `name` on `PATH`, else in the newest `/usr/lib/postgresql/*/bin` (Debian's layout).
    static func binary(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where access("\(folder)/\(name)", X_OK) == 0 {
            return "\(folder)/\(name)"
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let candidate = "/usr/lib/postgresql/\(version)/bin/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func startCluster(initdb: String, pgctl: String, psql: String) throws -> PostgresTestServer {
        let cluster = try PostgresCluster.start(initdb: initdb, pgctl: pgctl)
        clusterToStop = cluster
        atexit { clusterToStop?.stop() }
        return try PostgresTestServer(url: cluster.url(database: "postgres"), psql: psql)
    }

    /// Runs `arguments` (the program first, by path) with its output appended to the file `output` (nil: dropped)
    /// and standard input empty; its exit status, or -1 when it could not start or was killed. Not `TestProcess`:
    /// Foundation's `Process` did not see `pg_ctl start` end while the server it leaves running lived (the wait ran
    /// out after 120 s), and the exit handler cannot count on Foundation.
    static func spawnAndWait(_ arguments: [String], output: String?) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, arguments[0], &actions, nil, &pointers, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED and WEXITSTATUS by hand (macros Swift does not import).
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -1
    }

    /// A loopback port nothing listens on now (bound to port 0 and released).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure("cannot open a socket to find a free port") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw Failure("cannot bind a loopback socket to find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// What the exit handler stops and removes (a C function pointer captures nothing).
nonisolated(unsafe) private var clusterToStop: PostgresCluster?
