import Foundation
import SalvoPostgres
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite("PostgreSQL location", .tags(.pure), .runs(.pure))
struct PostgresLocationTests {
    @Test(
        "a mistyped URL is refused with its password blanked",
        arguments: [
            "postgres//sender:hunter2secret@db.example/tokens", "postgres:/sender:hunter2secret@db.example/tokens",
            "postgres:sender:hunter2secret@db.example/tokens", "sender:hunter2secret@db.example/tokens",
            "postgresql//sender:hunter2secret@db.example:5432/tokens?sslmode=require",
        ]
    )
    func mistypedURLNeverShowsThePassword(url: String) {
        let error = #expect(throws: JobError.self) { try PostgresLocation(url: url, environment: [:]) }
        #expect(error?.message.contains("hunter2secret") == false, "\(error?.message ?? "")")
        #expect(error?.message.contains("sender:…@db.example") == true, "\(error?.message ?? "")")
    }

    @Test("a full URL: every part read, the password never shown")
    func fullURL() throws {
        let location = try PostgresLocation(
            url: "postgres://mail%40ops:s3cret%2Fpw@db.example:6543/campaigns?sslmode=require",
            environment: [:]
        )
        #expect(location.user == "mail@ops")
        #expect(location.host == "db.example")
        #expect(location.port == 6543)
        #expect(location.database == "campaigns")
        #expect(location.tlsMode == .require)
        #expect(location.passwordSource == .url)
        #expect(location.redacted == "postgres://mail%40ops@db.example:6543/campaigns?sslmode=require")
        for shown in [location.redacted, location.description, location.debugDescription, "\(location)"] {
            #expect(!shown.contains("s3cret"))
        }
        let configuration = try location.configuration()
        #expect(configuration.password == "s3cret/pw")
        #expect(configuration.username == "mail@ops")
        #expect(configuration.tls.isEnforced)
    }

    @Test("what the URL leaves out comes from PGUSER, PGHOST, PGPORT, PGDATABASE and PGPASSWORD")
    func environmentDefaults() throws {
        let environment = [
            "PGUSER": "sender", "PGHOST": "10.1.2.3", "PGPORT": "5433", "PGDATABASE": "tokens", "PGPASSWORD": "pw",
        ]
        let location = try PostgresLocation(url: "postgres://", environment: environment)
        #expect(location.redacted == "postgres://sender@10.1.2.3:5433/tokens?sslmode=prefer")
        #expect(location.passwordSource == .environment)
        #expect(try location.configuration().password == "pw")
        #expect(try location.configuration().tls.isAllowed)
        #expect(try !location.configuration().tls.isEnforced)
    }

    @Test("a password file's first line is the password; one in the URL too is refused")
    func passwordFile() throws {
        let folder = TestScratch.root.appendingPathComponent("postgres-location-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.path + "/pw"
        try Data("from-file\nignored\n".utf8).write(to: URL(fileURLWithPath: file))
        let location = try PostgresLocation(
            url: "postgresql://u@127.0.0.1/db?sslmode=disable",
            passwordFile: file,
            environment: ["PGPASSWORD": "from-env"]
        )
        #expect(location.passwordSource == .file)
        #expect(try location.configuration().password == "from-file")
        #expect(try !location.configuration().tls.isAllowed)
        #expect(throws: JobError.self) {
            try PostgresLocation(url: "postgres://u:other@127.0.0.1/db", passwordFile: file, environment: [:])
        }
        let missing = #expect(throws: JobError.self) {
            try PostgresLocation(
                url: "postgres://u@127.0.0.1/db",
                passwordFile: folder.path + "/none",
                environment: [:]
            )
        }
        #expect(missing?.code == .input)
        #expect(missing?.message.contains("--postgres-password-file") == true)
    }

    @Test("a URL that is not PostgreSQL's, an unknown parameter or sslmode: refused without showing the password")
    func refusals() {
        let cases = [
            "mysql://u:hunter2@h/db", "postgres://u:hunter2@h/db?sslmode=always",
            "postgres://u:hunter2@h/db?sslcompression=1", "postgres://u:hunter2@h/db?connect_timeout=0",
        ]
        for url in cases {
            let error = #expect(throws: JobError.self) { try PostgresLocation(url: url, environment: [:]) }
            #expect(error?.code == .configuration)
            #expect(error?.message.contains("hunter2") == false, "\(url)")
        }
    }

    @Test("verify-full checks the host name; an unreadable sslrootcert is named")
    func verification() throws {
        let location = try PostgresLocation(url: "postgres://u@localhost/db?sslmode=verify-full", environment: [:])
        #expect(try location.tlsConfiguration().certificateVerification == .fullVerification)
        #expect(try location.configuration().options.tlsServerName == "localhost")
        let unreadable = try PostgresLocation(
            url: "postgres://u@localhost/db?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem",
            environment: [:]
        )
        let error = #expect(throws: JobError.self) { try unreadable.configuration() }
        #expect(error?.message.contains("/nonexistent/ca.pem") == true)
    }
}
