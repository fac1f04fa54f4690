import ArgumentParser
import SalvoConsole
import SalvoService
import SalvoServiceStores

/// `salvo serve keys`: the service's API keys, in its store. A key is shown once, when made; the store keeps only
/// its SHA-256.
struct ServeKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Make, list and revoke the service's API keys.",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct StoreOption: ParsableArguments {
        @Option(help: "The service's store: its folder, or a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE).")
        var store = "salvo-store"

        @Option(
            name: .customLong("postgres-password-file"),
            help: "With a PostgreSQL store: the file whose first line is the password (else the URL's, or PGPASSWORD)."
        )
        var passwordFile: String?

        func open() async throws -> any ServiceStore {
            do {
                return try await ServiceStoreLocation(self.store, passwordFile: self.passwordFile)
                    .open(workerID: WorkerID.make())
            } catch {
                throw UserError(error.message)
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a key: prints it once.")

        @OptionGroup var store: StoreOption

        @Option(help: "What the key is for (a name to recognise it by).")
        var name: String

        func run() async throws { try await exitingOnUserError { try await self.perform() } }

        private func perform() async throws {
            let store = try await self.store.open()
            let (key, record) = APIKeys.make(name: self.name, now: ServiceClock.milliseconds())
            do {
                try await store.addAPIKey(record)
            } catch {
                await store.close()
                throw UserError(error.message)
            }
            await store.close()
            print("id:  \(record.id)")
            print("key: \(key)")
            print("(the key is shown only now; the store keeps its SHA-256)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the keys (never the keys themselves).")

        @OptionGroup var store: StoreOption

        func run() async throws { try await exitingOnUserError { try await self.perform() } }

        private func perform() async throws {
            let store = try await self.store.open()
            let keys: [APIKeyRecord]
            do {
                keys = try await store.apiKeys()
            } catch {
                await store.close()
                throw UserError(error.message)
            }
            await store.close()
            for key in keys {
                let state = key.revokedAt == nil ? "active" : "revoked"
                print("\(key.id)  \(state)  \(key.name)")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a key (a running service refuses it from its next request that misses its cache)."
        )

        @OptionGroup var store: StoreOption

        @Argument(help: "The key's id (from list).")
        var id: String

        func run() async throws { try await exitingOnUserError { try await self.perform() } }

        private func perform() async throws {
            let store = try await self.store.open()
            let revoked: Bool
            do {
                revoked = try await store.revokeAPIKey(id: self.id, now: ServiceClock.milliseconds())
            } catch {
                await store.close()
                throw UserError(error.message)
            }
            await store.close()
            guard revoked else { throw UserError("no active key \(self.id)") }
            print("revoked \(self.id)")
        }
    }
}
