import Foundation
import NIOCore
import NIOSSL
import PostgresNIO
import SalvoRows

/// Where a PostgreSQL server is and how to log in: `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=MODE`, as
/// libpq writes it.
///
/// The password comes from the URL, else from `--postgres-password-file` (its first line), else from `PGPASSWORD`.
/// It is never shown: `description` and `redacted` leave it out, and no message of this module quotes it. A part the
/// URL leaves out is taken as libpq takes it: the user from `PGUSER`, then `USER`; the host from `PGHOST`, then
/// `127.0.0.1`; the port from `PGPORT`, then 5432; the database from `PGDATABASE`, then the user's name.
///
/// `sslmode` is libpq's: `disable` (plain), `prefer` (the default: TLS when the server offers it, unverified),
/// `require` (TLS, unverified), `verify-ca` (TLS, the chain checked against `sslrootcert` or the system's roots) and
/// `verify-full` (the chain and the host name). Other parameters: `sslrootcert=PATH`, `connect_timeout=SECONDS`
/// (default 10), `application_name=NAME`.
public struct PostgresLocation: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// libpq's `sslmode`.
    public enum TLSMode: String, Sendable, CaseIterable {
        case disable
        case prefer
        case require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// Where the password came from, for messages (never the password itself).
    public enum PasswordSource: String, Sendable {
        case none = "no password"
        case url = "the URL's password"
        case file = "--postgres-password-file"
        case environment = "PGPASSWORD"
    }

    public let host: String
    public let port: Int
    public let user: String
    public let database: String
    public let tlsMode: TLSMode
    /// `sslrootcert`: PEM CA certificates that verify the server (`verify-ca`, `verify-full`).
    public let rootCertificates: String?
    public let connectTimeout: Duration
    public let applicationName: String
    public let passwordSource: PasswordSource
    /// The option that gave the URL, as messages name it (`--from-postgres`, `--store`).
    public let option: String
    private let password: String?

    /// Reads `url`, and the password from it, `passwordFile` or `environment["PGPASSWORD"]`; messages name `option`.
    ///
    /// - Throws: `JobError(.configuration)` for a URL that is not a PostgreSQL one, an unknown parameter or
    ///   `sslmode`, a password given twice; `JobError(.input)` for a password file that cannot be read or is empty.
    public init(
        url: String,
        passwordFile: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        option: String = "--from-postgres"
    ) throws(JobError) {
        self.option = option
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else {
            throw JobError(
                .configuration,
                "\(option) takes a URL postgres://USER@HOST:PORT/DATABASE?sslmode=MODE (got "
                    + "\(Self.withoutPassword(url)))"
            )
        }
        // `postgres:user:pw@host/db` or `postgres:/user:pw@host/db` parse with no host and the user info in the path
        // (which would become the database's name, and be shown): refused, the password blanked.
        guard components.percentEncodedHost != nil || !url.contains("@") else {
            throw JobError(
                .configuration,
                "\(option) takes a URL postgres://USER@HOST:PORT/DATABASE?sslmode=MODE (got "
                    + "\(Self.withoutPassword(url)): no '//' before the user and host"
            )
        }
        var parameters: [String: String] = [:]
        for item in components.queryItems ?? [] {
            parameters[item.name] = item.value ?? ""
        }
        let known: Set = ["sslmode", "sslrootcert", "connect_timeout", "application_name"]
        if let unknown = parameters.keys.sorted().first(where: { !known.contains($0) }) {
            throw JobError(
                .configuration,
                "\(option): the parameter \(unknown) is not understood (known: \(known.sorted().joined(separator: ", ")))"
            )
        }
        let modeText = parameters["sslmode"] ?? "prefer"
        guard let mode = TLSMode(rawValue: modeText) else {
            throw JobError(
                .configuration,
                "\(option): sslmode=\(modeText) is not one of "
                    + TLSMode.allCases.map(\.rawValue).joined(separator: ", ")
            )
        }
        self.tlsMode = mode
        self.rootCertificates = parameters["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        if let text = parameters["connect_timeout"] {
            guard let seconds = Int(text), (1...3600).contains(seconds) else {
                throw JobError(.configuration, "\(option): connect_timeout is 1 to 3600 seconds (got \(text))")
            }
            self.connectTimeout = .seconds(seconds)
        } else {
            self.connectTimeout = .seconds(10)
        }
        self.applicationName = parameters["application_name"] ?? "salvo"

        let host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? environment["PGHOST"] ?? "127.0.0.1"
        guard !host.hasPrefix("/") else {
            throw JobError(
                .configuration,
                "\(option): a Unix socket host (\(host)) is not supported; name a TCP host"
            )
        }
        // An IPv6 literal comes bracketed in a URL; the socket wants it bare.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if let port = components.port {
            self.port = port
        } else if let text = environment["PGPORT"] {
            guard let port = Int(text), (1...65535).contains(port) else {
                throw JobError(.configuration, "PGPORT=\(text) is not a port number")
            }
            self.port = port
        } else {
            self.port = 5432
        }
        guard (1...65535).contains(self.port) else {
            throw JobError(.configuration, "\(option): port \(self.port) is not 1 to 65535")
        }
        let user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? environment["PGUSER"] ?? environment["USER"]
        guard let user else {
            throw JobError(.configuration, "\(option): the URL names no user (postgres://USER@HOST/DATABASE)")
        }
        self.user = user
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.database = path.isEmpty ? environment["PGDATABASE"] ?? user : path

        let inURL = components.password
        switch (inURL, passwordFile) {
        case (.some, .some(let file)):
            throw JobError(
                .configuration,
                "\(option) holds a password and --postgres-password-file \(file) names another: give it once"
            )
        case (.some(let password), nil):
            self.password = password
            self.passwordSource = .url
        case (nil, .some(let file)):
            self.password = try Self.readPassword(file)
            self.passwordSource = .file
        case (nil, nil):
            self.password = environment["PGPASSWORD"]
            self.passwordSource = self.password == nil ? .none : .environment
        }
    }

    /// The URL without its password: `postgres://USER@HOST:PORT/DATABASE?sslmode=MODE`. What messages, the report and
    /// the journal show.
    public var redacted: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "postgres://\(Self.escaped(self.user))@\(host):\(self.port)/\(Self.escaped(self.database))"
            + "?sslmode=\(self.tlsMode.rawValue)"
    }

    public var description: String { self.redacted }
    public var debugDescription: String { "PostgresLocation(\(self.redacted), \(self.passwordSource.rawValue))" }

    /// The server's identity for a job's journal and report: host, port and database (no user, no password).
    public var server: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "\(host):\(self.port)/\(self.database)"
    }

    /// `connectTimeout` as NIO counts time.
    var connectTimeAmount: TimeAmount { .nanoseconds(Int64(self.connectTimeout.components.seconds) * 1_000_000_000) }

    /// A single connection's configuration: to `host:port`, or over `channel`, a TCP connection to it already made.
    ///
    /// - Throws: `JobError(.configuration)` when the TLS settings cannot be made (an unreadable `sslrootcert`).
    public func configuration(over channel: (any Channel)? = nil) throws(JobError) -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch self.tlsMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: try self.tlsConfiguration()))
            default: tls = .require(try NIOSSLContext(configuration: try self.tlsConfiguration()))
            }
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(.configuration, "\(self.option) \(self.redacted): cannot set up TLS: \(error)")
        }
        var configuration =
            if let channel {
                PostgresConnection.Configuration(
                    establishedChannel: channel,
                    tls: tls,
                    username: self.user,
                    password: self.password,
                    database: self.database
                )
            } else {
                PostgresConnection.Configuration(
                    host: self.host,
                    port: self.port,
                    username: self.user,
                    password: self.password,
                    database: self.database,
                    tls: tls
                )
            }
        configuration.options.connectTimeout = self.connectTimeAmount
        configuration.options.additionalStartupParameters = [("application_name", self.applicationName)]
        if self.tlsMode == .verifyFull { configuration.options.tlsServerName = self.host }
        return configuration
    }

    /// A pool's configuration (`PostgresClient`), for work that runs many statements.
    ///
    /// - Throws: `JobError(.configuration)` when the TLS settings cannot be made (an unreadable `sslrootcert`).
    public func clientConfiguration() throws(JobError) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch self.tlsMode {
            case .disable: .disable
            case .prefer: .prefer(try self.tlsConfiguration())
            default: .require(try self.tlsConfiguration())
            }
        var configuration = PostgresClient.Configuration(
            host: self.host,
            port: self.port,
            username: self.user,
            password: self.password,
            database: self.database,
            tls: tls
        )
        configuration.options.connectTimeout = self.connectTimeout
        configuration.options.additionalStartupParameters = [("application_name", self.applicationName)]
        if self.tlsMode == .verifyFull { configuration.options.tlsServerName = self.host }
        return configuration
    }

    /// The client TLS settings `tlsMode` asks for.
    public func tlsConfiguration() throws(JobError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch self.tlsMode {
        case .disable, .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let file = self.rootCertificates, self.tlsMode == .verifyCA || self.tlsMode == .verifyFull {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
            } catch {
                throw JobError(.configuration, "\(self.option): sslrootcert=\(file): cannot read PEM certificates")
            }
        }
        return tls
    }

    /// The first line of `file`, without its line end.
    private static func readPassword(_ file: String) throws(JobError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw JobError(.input, "--postgres-password-file \(file): cannot read the file")
        }
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).first
            .map(String.init)
        guard let line, !line.isEmpty else {
            throw JobError(.input, "--postgres-password-file \(file): the file's first line is empty (no password)")
        }
        return line.hasSuffix("\r") ? String(line.dropLast()) : line
    }

    /// `url` with whatever stands between `USER:` and the last `@` blanked, for a message about a URL that did not
    /// parse: the user info is what follows the last `/` before that `@` (`postgres://`, or a mistyped `postgres//`
    /// or `postgres:/`), or the start of the text.
    static func withoutPassword(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let before = url[..<at]
        let userStart = before.lastIndex(of: "/").map { before.index(after: $0) } ?? before.startIndex
        var userInfo = before[userStart...]
        // `postgres:user:pw@…`: the scheme's colon is not the password's.
        if let colon = userInfo.firstIndex(of: ":"), userInfo[..<colon].lowercased().hasPrefix("postgres"),
            userInfo[userInfo.index(after: colon)...].contains(":")
        {
            userInfo = userInfo[userInfo.index(after: colon)...]
        }
        guard let colon = userInfo.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":…" + String(url[at...])
    }

    private static func escaped(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
