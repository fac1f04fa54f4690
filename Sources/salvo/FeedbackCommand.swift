import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoPostgres
import SalvoRows

/// `salvo feedback --gateway production --cert C --key K [--output FILE] [--into SUPPRESSION.csv]
/// [--into-postgres URL [--write-back TABLE | --write-back-sql STATEMENT]]`
struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Read the feedback service's list of devices that no longer take notifications (binary interface).",
        discussion: """
            Writes CSV `token,timestamp,time` (64 lowercase hex digits, UNIX seconds, ISO 8601) to standard \
            output or --output; --into merges the tuples into a suppression file (one row per token, the newest \
            timestamp kept); --into-postgres records them in a PostgreSQL table as `send --write-back` does \
            (once per token, after the files are written). The service clears its list once read: keep the \
            output. Exit status: 0 when every tuple was read; 1 when something was wrong with the stream (named; \
            the whole tuples are still written); 3 when the service could not be read at all, or the write-back \
            failed (the files are written).
            """
    )

    @Option(help: "HOST:PORT, or `production` / `sandbox` for feedback[.sandbox].push.apple.com:2196.")
    var gateway: String

    @OptionGroup var certificate: CertificateOptions
    @OptionGroup var proxy: ProxyOptions

    @Option(help: "Write the CSV to this file (atomically) instead of standard output.")
    var output: String?

    @Option(help: "Merge the tuples into this suppression file (created when missing).")
    var into: String?

    @Option(
        name: .customLong("into-postgres"),
        help: "Record the tuples in a PostgreSQL table: postgres://USER@HOST:PORT/DATABASE?sslmode=MODE."
    )
    var intoPostgres: String?

    @Option(
        name: .customLong("write-back"),
        help: "With --into-postgres: the table (default salvo_gone_tokens; layout in docs/postgres.md)."
    )
    var writeBackTable: String?

    @Option(
        name: .customLong("write-back-sql"),
        help: "With --into-postgres, instead of a table: the statement, with :tokens, :reasons, :reported_at, :job."
    )
    var writeBackSQL: String?

    @Option(
        name: .customLong("postgres-password-file"),
        help: "With --into-postgres: the password is this file's first line (else the URL's, else PGPASSWORD)."
    )
    var postgresPasswordFile: String?

    @Option(help: "Seconds the whole read may take.")
    var timeout: Int = 60

    @Option(help: "Transport: uring or socket (default: SALVO_TRANSPORT, else io_uring where the kernel allows it).")
    var transport: BinaryTransport?

    func validate() throws {
        guard self.certificate.isGiven else {
            throw ValidationError("give --cert and --key, or --pkcs12")
        }
        _ = try self.address()
        guard self.timeout >= 1 else { throw ValidationError("--timeout is at least 1 second (got \(self.timeout))") }
        if let output, let into, output == into {
            throw ValidationError("--output and --into both name \(output): give two files")
        }
        if self.intoPostgres == nil {
            let given = [
                ("--write-back", self.writeBackTable), ("--write-back-sql", self.writeBackSQL),
                ("--postgres-password-file", self.postgresPasswordFile),
            ]
            for (flag, value) in given where value != nil {
                throw ValidationError("\(flag) goes with --into-postgres URL")
            }
        }
        if self.writeBackTable != nil && self.writeBackSQL != nil {
            throw ValidationError("give --write-back TABLE or --write-back-sql STATEMENT, not both")
        }
    }

    func run() async throws {
        try await exitingOnUserError { try await self.read() }
    }

    private func address() throws(ValidationError) -> GatewayAddress {
        guard let address = GatewayAddress(parsing: self.gateway, for: .feedback) else {
            throw ValidationError("--gateway is HOST:PORT, production or sandbox (got \(self.gateway))")
        }
        return address
    }

    private func read() async throws {
        // Checked before the service is read: the service clears its list once read.
        let recorder = try self.intoPostgres.map { url in
            try WriteBackOptions.recorder(
                url: url,
                option: "--into-postgres",
                table: self.writeBackTable,
                sql: self.writeBackSQL,
                passwordFile: self.postgresPasswordFile,
                job: "feedback \(UnixTime.iso8601(Int64(Date().timeIntervalSince1970)))"
            )
        }
        // Logged in (and the statement tried, rolled back) before the service is read: a refused login or a missing
        // table found after reading would lose the tokens the service no longer holds.
        if let recorder, let problem = await recorder.check() {
            throw UserError("--into-postgres: \(problem); the feedback service was not read")
        }
        var transport = self.transport
        if transport == nil, let variable = ProcessInfo.processInfo.environment["SALVO_TRANSPORT"], variable != "auto" {
            transport = BinaryTransport(rawValue: variable)
        }
        let gateway = try self.address()
        var configuration = FeedbackClient.Configuration(
            gateway: gateway,
            serverName: self.certificate.serverName,
            credentials: self.certificate.credentials,
            timeout: .seconds(self.timeout),
            transport: transport
        )
        configuration.proxy = try self.proxy.configuration(forHost: gateway.host)
        let read: FeedbackRead
        do {
            read = try await FeedbackClient.read(configuration)
        } catch {
            throw UserError(error.message)
        }
        var list = SuppressionList()
        for entry in read.entries {
            list.add(.init(token: entry.token, timestamp: Int64(entry.timestamp), reason: "Feedback"))
        }
        do {
            if let output {
                try list.write(to: output, header: SuppressionList.feedbackHeader)
            } else {
                var text = SuppressionList.feedbackHeader + "\n"
                for entry in list.sortedEntries {
                    text += "\(entry.token.hexString),\(entry.timestamp),\(UnixTime.iso8601(entry.timestamp))\n"
                }
                FileHandle.standardOutput.write(Data(text.utf8))
            }
            if let into {
                let merged = try list.merge(into: into)
                FileHandle.standardError.write(Data("\(into): \(merged.count) token(s) suppressed\n".utf8))
            }
        } catch {
            throw UserError(error.message)
        }
        FileHandle.standardError.write(
            Data("read \(read.entries.count) tuple(s) from \(configuration.gateway)\n".utf8)
        )
        for problem in read.problems {
            FileHandle.standardError.write(Data("Warning: \(problem)\n".utf8))
        }
        if let recorder {
            let tokens = list.sortedEntries.map { entry in
                GoneToken(token: entry.token.hexString, reason: entry.reason, reportedAt: entry.timestamp * 1000)
            }
            let report = await recorder.record(tokens)
            if let failure = report.outputFailure { throw UserError(failure.summary) }
            FileHandle.standardError.write(Data("write-back \(report.summary)\n".utf8))
        }
        if !read.problems.isEmpty { throw ExitCode(1) }
    }
}
