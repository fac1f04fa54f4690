import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster on a free loopback port, started by `initdb` and `pg_ctl` (Debian keeps them in
/// /usr/lib/postgresql/VERSION/bin) as `.ci/run` starts its own: a superuser `salvo` with a password over TCP
/// (scram-sha-256), TLS on with a self-signed certificate when openssl is there, and, run as root, everything as the
/// `postgres` user (initdb refuses root). A test that must restart its server (`restart`) starts one of its own; the
/// others share `PostgresTestServer`'s.
public final class PostgresCluster: Sendable {
    public let folder: String
    public let port: Int
    public let user: String
    public let password: String
    private let pgctl: String
    private let runAs: [String]

    public typealias Failure = PostgresTestServer.Failure

    private init(folder: String, port: Int, user: String, password: String, pgctl: String, runAs: [String]) {
        self.folder = folder
        self.port = port
        self.user = user
        self.password = password
        self.pgctl = pgctl
        self.runAs = runAs
    }

    /// The URL of `database`, password included.
    public func url(database: String) -> String {
        "postgres://\(self.user):\(self.password)@127.0.0.1:\(self.port)/\(database)?sslmode=disable"
    }

    /// Starts a cluster with the `initdb` and `pg_ctl` found on PATH or under /usr/lib/postgresql.
    ///
    /// - Throws: `Failure` naming what is missing, or the command that failed with its output.
    public static func start() throws -> PostgresCluster {
        guard let initdb = PostgresTestServer.binary("initdb"), let pgctl = PostgresTestServer.binary("pg_ctl") else {
            throw Failure(
                "no PostgreSQL to start a cluster of the test's own: initdb and pg_ctl on PATH or in "
                    + "/usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
            )
        }
        return try Self.start(initdb: initdb, pgctl: pgctl)
    }

    static func start(initdb: String, pgctl: String) throws -> PostgresCluster {
        var template = Array("/tmp/salvo-test-postgres-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw Failure("cannot make a folder for a PostgreSQL cluster in /tmp")
        }
        let folder = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let sockets = folder + "/sockets"
        let user = "salvo"
        let password = "salvo-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: sockets, withIntermediateDirectories: true)
        try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/pwfile"))
        // TLS on, with a self-signed certificate, for `sslmode=require` (as .ci/run's cluster).
        var tls = ""
        if let openssl = PostgresTestServer.binary("openssl") {
            let (status, _) = try TestProcess.runToEnd(
                openssl,
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-keyout",
                    folder + "/server.key", "-out", folder + "/server.crt",
                ]
            )
            if status == 0 {
                chmod(folder + "/server.key", 0o600)
                tls = " -c ssl=on -c ssl_cert_file=\(folder)/server.crt -c ssl_key_file=\(folder)/server.key"
            }
        }
        // initdb refuses root: the cluster then belongs to the `postgres` user.
        var runAs: [String] = []
        if getuid() == 0 {
            guard let account = getpwnam("postgres") else {
                throw Failure("run as root, and no `postgres` user to own a PostgreSQL cluster (initdb refuses root)")
            }
            for name in ["", "/sockets", "/pwfile", "/server.key", "/server.crt"] {
                chown(folder + name, account.pointee.pw_uid, account.pointee.pw_gid)
            }
            runAs = ["/usr/sbin/runuser", "-u", "postgres", "--"]
        }
        let port = try PostgresTestServer.freePort()
        let cluster = PostgresCluster(
            folder: folder,
            port: port,
            user: user,
            password: password,
            pgctl: pgctl,
            runAs: runAs
        )
        try cluster.run([
            initdb, "-D", cluster.data, "-U", user, "--pwfile", folder + "/pwfile", "--auth-host", "scram-sha-256",
            "--auth-local", "trust", "-E", "UTF8", "--no-sync",
        ])
        let options = "-p \(port) -k \(sockets) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" + tls
        try cluster.run([
            pgctl, "-D", cluster.data, "-o", options, "-l", folder + "/server.log", "-w", "-t", "60", "start",
        ])
        return cluster
    }

    private var data: String { self.folder + "/data" }

    /// `pg_ctl restart -m fast`: every session ended, the server stopped and started again on the same port, waited
    /// for (at most 60 s).
    public func restart() throws {
        try self.run([
            self.pgctl, "-D", self.data, "-l", self.folder + "/server.log", "-m", "fast", "-w", "-t", "60", "restart",
        ])
    }

    /// Runs `sql` in `database` with psql; what it printed, unaligned and without headers (`psql -At`).
    ///
    /// - Throws: `Failure` with psql's error when psql is missing or a statement fails.
    @discardableResult
    public func query(_ sql: String, database: String = "postgres") async throws -> String {
        guard let psql = PostgresTestServer.binary("psql") else { throw Failure("psql is not installed") }
        let run = try TestProcess(
            psql,
            ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(database: database), "-c", sql],
            environment: ["PGCONNECT_TIMEOUT": "10", "PGOPTIONS": "-c statement_timeout=60s"],
            input: .nothing,
            output: .apart
        )
        let status = try await run.wait(seconds: 90)
        guard status == 0 else { throw Failure("psql \(sql.prefix(200)): exit \(status): \(run.standardError)") }
        return run.standardOutput
    }

    /// Stops the server at once and removes its folder.
    public func stop() {
        _ = PostgresTestServer.spawnAndWait(
            self.runAs + [self.pgctl, "-D", self.data, "-m", "immediate", "-w", "stop"],
            output: nil
        )
        try? FileManager.default.removeItem(atPath: self.folder)
    }

    /// Runs a PostgreSQL command as the cluster's owner, its output into the cluster's `commands.log`. Spawned and
    /// waited for directly: the server that `pg_ctl start` leaves running would hold a pipe open for ever.
    private func run(_ arguments: [String]) throws {
        let log = self.folder + "/commands.log"
        let status = PostgresTestServer.spawnAndWait(self.runAs + arguments, output: log)
        guard status == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure("\(arguments.joined(separator: " ")): exit \(status): \(output.suffix(2000))")
        }
    }
}
