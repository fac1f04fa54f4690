import Foundation
import SalvoServiceStores
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo serve` and `salvo serve keys` as an operator runs them: messages and exit codes.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(2)))
struct ServeCommandLineTests {
    @Test func keysAreMadeListedAndRevokedInTheNamedStore() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let folder = URL(fileURLWithPath: try scratchFolder("keys"))
        let store = folder.appendingPathComponent("store").path
        let (created, output) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", store, "--name", "backend"]
        )
        #expect(created == 0, "\(output)")
        let id = try #require(
            output.split(separator: "\n").first { $0.hasPrefix("id:") }.map { $0.split(separator: " ").last! }
        )
        #expect(output.contains("key: salvo_"))
        #expect(FileManager.default.fileExists(atPath: store + "/salvo.sqlite"), "the key went into --store")
        let (listed, list) = try await TestProcess.run(salvo, ["serve", "keys", "list", "--store", store])
        #expect(listed == 0 && list.contains("\(id)  active  backend"), "\(list)")
        #expect(!list.contains("salvo_"), "a listing never shows a key")
        let (revoked, _) = try await TestProcess.run(salvo, ["serve", "keys", "revoke", "--store", store, String(id)])
        #expect(revoked == 0)
        let (again, message) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "revoke", "--store", store, String(id)]
        )
        #expect(again == 3 && message.contains("no active key \(id)"), "\(message)")
        let (_, after) = try await TestProcess.run(salvo, ["serve", "keys", "list", "--store", store])
        #expect(after.contains("\(id)  revoked  backend"), "\(after)")
    }

    @Test func aServiceThatCannotRunSaysWhyAndExits() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let (noCredentials, usage) = try await TestProcess.run(salvo, ["serve", "--listen", "127.0.0.1:0"])
        #expect(noCredentials == 64 && usage.contains("the gateway credentials"), "\(usage)")
        let (badListen, listenMessage) = try await TestProcess.run(salvo, ["serve", "--demo", "--listen", "nowhere"])
        #expect(badListen == 64 && listenMessage.contains("--listen is HOST:PORT"), "\(listenMessage)")
        // A port another listener holds.
        guard let (descriptor, port) = LoopbackSocket.bound() else {
            Issue.record("no loopback port")
            return
        }
        defer { close(descriptor) }
        #expect(listen(descriptor, 1) == 0)
        let folder = try scratchFolder("taken")
        let (taken, takenMessage) = try await TestProcess.run(
            salvo,
            ["serve", "--demo", "--listen", "127.0.0.1:\(port)", "--store", folder + "/store", "--log-level", "error"]
        )
        #expect(taken == 3 && takenMessage.contains("--listen 127.0.0.1:\(port)"), "\(takenMessage)")
        // A lease only goes with a shared store, and is bounded.
        let (folderLease, folderLeaseMessage) = try await TestProcess.run(
            salvo,
            ["serve", "--demo", "--store", folder + "/store", "--lease-seconds", "10"]
        )
        #expect(
            folderLease == 64 && folderLeaseMessage.contains("--lease-seconds goes with a PostgreSQL store"),
            "\(folderLeaseMessage)"
        )
        let (shortLease, shortLeaseMessage) = try await TestProcess.run(
            salvo,
            ["serve", "--demo", "--store", "postgres://salvo@127.0.0.1:1/x", "--lease-seconds", "2"]
        )
        #expect(
            shortLease == 64 && shortLeaseMessage.contains("--lease-seconds is 3 to 86400 (seconds), not 2"),
            "\(shortLeaseMessage)"
        )
        // So do a campaign partition's lease and size.
        for (arguments, message) in [
            (["--store", folder + "/store", "--campaign-lease-seconds", "10"], "--campaign-lease-seconds goes with"),
            (
                ["--store", folder + "/store", "--campaign-partition-rows", "500"],
                "--campaign-partition-rows goes with"
            ),
            (
                ["--store", "postgres://salvo@127.0.0.1:1/x", "--campaign-lease-seconds", "2"],
                "--campaign-lease-seconds is 3 to 86400 (seconds), not 2"
            ),
            (
                ["--store", "postgres://salvo@127.0.0.1:1/x", "--campaign-partition-rows", "99"],
                "--campaign-partition-rows is 100 to 10000000, not 99"
            ),
        ] {
            let (status, output) = try await TestProcess.run(salvo, ["serve", "--demo"] + arguments)
            #expect(status == 64 && output.contains(message), "\(arguments): \(output)")
        }
    }

    @Test func aBadWebhookIsRefusedNamingWhatIsWrong() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let folder = try scratchFolder("webhooks")
        let secret = folder + "/secret"
        try Data("a secret of thirty-two bytes, ok".utf8).write(to: URL(fileURLWithPath: secret))
        let short = folder + "/short"
        try Data("short\n".utf8).write(to: URL(fileURLWithPath: short))
        let cases: [(arguments: [String], message: String)] = [
            (["--webhook", "ftp://example.com/x", "--webhook-secret-file", secret], "not an http:// or https:// URL"),
            (
                ["--webhook", "https://example.com events=gone,lost", "--webhook-secret-file", secret],
                #"unknown event kind "lost" (known: gone, refused, outcome, campaign)"#
            ),
            (["--webhook", "https://example.com"], "--webhook needs --webhook-secret-file"),
            (["--webhook", "https://example.com", "--webhook-secret-file", short], "at least 16"),
            (
                [
                    "--webhook", "https://example.com", "--webhook", "https://example.com events=gone",
                    "--webhook-secret-file", secret,
                ], "is given twice"
            ),
            (["--webhook-secret-file", secret], "--webhook-secret-file goes with --webhook"),
        ]
        for (arguments, message) in cases {
            let (status, output) = try await TestProcess.run(salvo, ["serve", "--demo"] + arguments)
            #expect(status == 64 && output.contains(message), "\(arguments): \(output)")
            #expect(!output.contains("thirty-two"), "the secret is never shown")
        }
    }

    @Test func aBadCampaignDatabaseIsRefusedWithItsPasswordNeverShown() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let folder = try scratchFolder("campaign-postgres")
        let missing = folder + "/no-such-password-file"
        let cases: [(arguments: [String], status: Int32, message: String)] = [
            (["--campaign-postgres-password-file", missing], 64, "goes with --campaign-postgres"),
            (["--campaign-postgres", "mysql://u:hush-hush@h/d"], 64, "--campaign-postgres takes a URL postgres://"),
            (
                ["--campaign-postgres", "postgres://u@127.0.0.1:1/d", "--campaign-postgres-password-file", missing],
                3, missing
            ),
        ]
        for (arguments, expected, message) in cases {
            let (status, output) = try await TestProcess.run(salvo, ["serve", "--demo"] + arguments)
            #expect(status == expected && output.contains(message), "\(arguments): \(output)")
            #expect(!output.contains("hush-hush"), "the password is never shown")
        }
    }

    @Test(.tags(.network)) func aPostgreSQLStoreIsMigratedOnceAndTheServiceRefusesOneNotMigrated() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("serve_migrate")
        let url = server.url(database: database)
        let shown = server.urlWithoutPassword(database: database)
        // Not migrated: the service does not start, says what to run, and never shows the password.
        let (refused, refusal) = try await TestProcess.run(
            salvo,
            ["serve", "--demo", "--listen", "127.0.0.1:0", "--store", url, "--log-level", "error"]
        )
        #expect(refused == 3 && refusal.contains("run `salvo serve migrate --store URL` first"), "\(refusal)")
        #expect(refusal.contains(shown) && !refusal.contains(server.password), "\(refusal)")
        let (first, migrated) = try await TestProcess.run(salvo, ["serve", "migrate", "--store", url])
        #expect(
            first == 0 && migrated.contains("\(shown): schema version 0 -> \(PostgresStoreSchema.version)"),
            "\(migrated)"
        )
        let (second, again) = try await TestProcess.run(salvo, ["serve", "migrate", "--store", url])
        #expect(
            second == 0 && again.contains("schema version \(PostgresStoreSchema.version), nothing to do"),
            "\(again)"
        )
        #expect(!(migrated + again).contains(server.password))
        // The keys go into the same database.
        let (created, key) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", url, "--name", "fleet"]
        )
        #expect(created == 0 && key.contains("key: salvo_"), "\(key)")
        let (listed, list) = try await TestProcess.run(salvo, ["serve", "keys", "list", "--store", url])
        #expect(listed == 0 && list.contains("active  fleet"), "\(list)")
        let (folder, folderMessage) = try await TestProcess.run(
            salvo,
            ["serve", "migrate", "--store", try scratchFolder("not-a-url")]
        )
        #expect(folder == 3 && folderMessage.contains("migrate takes a PostgreSQL URL"), "\(folderMessage)")
    }
}
