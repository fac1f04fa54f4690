import ArgumentParser
import Foundation
import NIOSSL
import SalvoBroadcast
import SalvoConsole
import SalvoHTTP2
import SalvoRows
import SalvoSend

/// Where the channel management service and the broadcast endpoint are, and how to authenticate (shared by
/// `channels` and `broadcast`): Apple's hosts for `--environment`, or `--host` (a simulator); a certificate or a
/// signing key, as `send` takes them.
struct BroadcastServiceOptions: ParsableArguments {
    @Option(name: .customLong("bundle-id"), help: "The app's bundle id (no push-type suffix).")
    var bundleID: String

    @Option(help: "development (sandbox, channels on port 2195) or production (port 2196).")
    var environment: BroadcastEnvironment = .development

    @Option(help: "HOST:PORT instead of Apple's host for --environment (a simulator).")
    var host: String?

    @OptionGroup var certificate: CertificateOptions
    @OptionGroup var signingKey: SigningKeyOptions
    @OptionGroup var proxy: ProxyOptions

    @Option(
        name: .customLong("token-cache"),
        help: "With --auth-key: the file where processes using the key share one provider token."
    )
    var tokenCache: String?

    @Option(
        name: .customLong("provider-token-file"),
        help: "Send the provider token in this file (from `salvo token mint`) instead of minting one."
    )
    var providerTokenFile: String?

    @Option(help: "Seconds a call may take, its retries included (and a connect for its handshake).")
    var timeout: Int = 15

    func validate() throws {
        if let problem = ChannelManagement.problem(bundleID: self.bundleID) {
            throw ValidationError("--bundle-id is the app's bundle id: \(problem)")
        }
        if self.bundleID.contains(".push-type.") {
            throw ValidationError("--bundle-id takes no push-type suffix (APNs would answer TopicDisallowed)")
        }
        do {
            _ = try self.credentials.choice()
        } catch {
            throw ValidationError(error.message)
        }
        guard (1...600).contains(self.timeout) else {
            throw ValidationError("--timeout is 1 to 600 seconds (got \(self.timeout))")
        }
        if let host { _ = try Self.split(host) }
    }

    /// `HOST:PORT`.
    static func split(_ text: String) throws(ValidationError) -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port), colon > text.startIndex
        else { throw ValidationError("--host is HOST:PORT (got \(text))") }
        return (String(text[..<colon]), port)
    }

    /// The channel management endpoint, or with `push` the broadcast endpoint.
    func endpoint(push: Bool) throws -> HTTP2Endpoint {
        var (host, port) =
            push
            ? (self.environment.pushHost, self.environment.pushPort)
            : (self.environment.managementHost, self.environment.managementPort)
        if let override = self.host { (host, port) = try Self.split(override) }
        var endpoint = HTTP2Endpoint(
            host: host,
            port: port,
            serverName: self.certificate.serverName,
            authentication: try self.authentication()
        )
        if let ca = self.certificate.ca { endpoint.trustRoots = try trustRoots(caFile: ca) }
        endpoint.connectTimeout = .seconds(self.timeout)
        endpoint.requestTimeout = .seconds(self.timeout)
        endpoint.proxy = try self.proxy.configuration(forHost: host)
        return endpoint
    }

    /// Connects to the channel management service.
    func channelClient() async throws -> ChannelClient {
        let endpoint = try self.endpoint(push: false)
        do {
            var client = ChannelClient(exchanger: try await HTTP2Exchanger.connect(endpoint), bundleID: self.bundleID)
            // One bound for each call, its retries included, as for a request.
            client.giveUp = .seconds(self.timeout)
            return client
        } catch {
            throw UserError("channel management at \(endpoint.address): \(error)")
        }
    }

    /// The one credential the options name, as `send` loads it.
    private var credentials: HTTP2Credentials {
        http2Credentials(
            certificate: self.certificate,
            signingKey: self.signingKey,
            providerTokenFile: self.providerTokenFile,
            tokenCache: self.tokenCache
        )
    }

    private func authentication() throws -> APNSAuthentication {
        try http2Authentication(
            certificate: self.certificate,
            signingKey: self.signingKey,
            providerTokenFile: self.providerTokenFile,
            tokenCache: self.tokenCache
        )
    }
}

extension BroadcastEnvironment: ExpressibleByArgument {}

/// `salvo channels create|get|delete|list`: Live Activity broadcast channels of an app.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Manage the broadcast channels of an app (Live Activities, iOS 18).",
        discussion: """
            Exit status: 0 when every channel asked for was handled; 1 when APNs refused some (each is printed \
            with Apple's reason); 3 when the job could not run (credentials, connection, the channel limit, a \
            journal of another job); 64 for wrong arguments; 130 or 143 after SIGINT or SIGTERM.
            """,
        subcommands: [CreateChannels.self, GetChannels.self, DeleteChannels.self, ListChannels.self]
    )
}

/// `salvo channels create --count N | --names FILE.csv --inventory OUT.csv`
struct CreateChannels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create channels, one per name, and write their inventory CSV.",
        discussion: """
            The inventory (name,channel_id,policy,environment,created_at) lists only channels APNs confirmed; \
            names already in it are not created again. With --journal the job resumes after any interruption, \
            kill -9 included, without making a second channel for a name: each create's intent is on the disk \
            before it is sent, and a create left unanswered is settled from the app's channel list (see \
            docs/broadcast.md for the rule).
            """
    )

    @OptionGroup var service: BroadcastServiceOptions

    @Option(name: .customLong("storage-policy"), help: "none (No Message Stored) or most-recent (kept up to 8 h).")
    var storagePolicy: String = "none"

    @Option(help: "Create this many channels, named <name-prefix>1 … <name-prefix>N.")
    var count: Int?

    @Option(name: .customLong("name-prefix"), help: "With --count: the names' prefix.")
    var namePrefix = "channel-"

    @Option(help: "A CSV of names (events, games), one channel each: its `name` column, else its first.")
    var names: String?

    @Option(help: "The inventory CSV to write (kept, and added to, when it exists).")
    var inventory: String

    @Option(help: "Keep the job's journal in this folder: a rerun resumes it without duplicates.")
    var journal: String?

    @Option(help: "Creates in flight at once (1 to 64).")
    var concurrency = 8

    @Flag(
        name: .customLong("forget-unresolved"),
        help: "Create again the names whose earlier create cannot be attributed (a channel may be left orphaned)."
    )
    var forgetUnresolved = false

    @Flag(help: "No progress line.")
    var quiet = false

    func validate() throws {
        guard MessageStoragePolicy(name: self.storagePolicy) != nil else {
            throw ValidationError("--storage-policy is none or most-recent (got \(self.storagePolicy))")
        }
        guard (self.count == nil) != (self.names == nil) else {
            throw ValidationError("give --count N or --names FILE")
        }
        if let count, !(1...channelLimitPerApp).contains(count) {
            throw ValidationError("--count is 1 to \(channelLimitPerApp) (got \(count))")
        }
        guard (1...64).contains(self.concurrency) else {
            throw ValidationError("--concurrency is 1 to 64 (got \(self.concurrency))")
        }
    }

    func run() async throws {
        try await exitingOnUserError { try await self.create() }
    }

    /// The names from `--count` or `--names`, checked (non-empty, unique).
    func channelNames() throws -> [String] {
        if let count { return (1...count).map { "\(self.namePrefix)\($0)" } }
        let path = self.names!
        let table: CSVTable
        do {
            table = try CSVTable.read(path)
        } catch {
            throw UserError(error.description)
        }
        let column = table.column("name") ?? 0
        var seen: [String: Int] = [:]
        var names: [String] = []
        // A file without a `name` header is a plain list: its first line is a name too.
        if table.column("name") == nil, let first = table.header.first, !first.isEmpty {
            names.append(first)
            seen[first] = 1
        }
        for (line, fields) in table.rows {
            let name = column < fields.count ? fields[column] : ""
            guard !name.isEmpty else { throw UserError("\(path):\(line): the name is empty") }
            if let earlier = seen[name] {
                throw UserError("\(path):\(line): the name \(name) is also on line \(earlier)")
            }
            seen[name] = line
            names.append(name)
        }
        guard !names.isEmpty else { throw UserError("\(path) holds no name") }
        return names
    }

    private func create() async throws {
        let names = try self.channelNames()
        var job = ChannelCreation(
            bundleID: self.service.bundleID,
            environment: self.service.environment,
            policy: MessageStoragePolicy(name: self.storagePolicy)!,
            names: names,
            inventoryPath: self.inventory
        )
        job.journalDirectory = self.journal
        job.concurrency = self.concurrency
        job.forgetUnresolved = self.forgetUnresolved
        let stop = JobStop(grace: .seconds(2))
        job.stop = stop
        let signals = SignalStop(stop: stop)
        defer { signals.cancel() }
        if !self.quiet && isatty(STDERR_FILENO) == 1 {
            job.progress = { settled, total in
                FileHandle.standardError.write(Data("\r\u{1B}[K\(settled)/\(total) channels".utf8))
            }
        }
        let client = try await self.service.channelClient()
        let result: ChannelCreation.Result
        do {
            result = try await job.run(client: client)
        } catch let failure as ChannelFailure {
            await client.exchanger.close()
            throw UserError("cannot list the app's channels: \(failure)")
        } catch let error as JobError {
            await client.exchanger.close()
            throw UserError(error.description)
        }
        await client.exchanger.close()
        if job.progress != nil { FileHandle.standardError.write(Data("\n".utf8)) }
        print(
            "\(result.created) created, \(result.adopted) settled from an earlier run, \(result.alreadyCreated) "
                + "already had a channel; \(result.failures.count) refused, \(result.unresolved.count) unresolved"
        )
        if let inApp = result.channelsInApp {
            print(
                "the app has \(inApp) channels in \(self.service.environment.rawValue); \(channelLimitPerApp - inApp) left"
            )
        }
        print("inventory: \(self.inventory) (\(result.inventoryCount) channels)")
        for (name, failure) in result.failures.prefix(50) { printError("\(name): \(failure)", prefix: "refused: ") }
        if result.failures.count > 50 { printError("… and \(result.failures.count - 50) more", prefix: "refused: ") }
        if !result.unresolved.isEmpty {
            printError(
                "\(result.unresolved.count) names (\(result.unresolved.prefix(5).joined(separator: ", "))…) may or may "
                    + "not have a channel: \(result.explanation ?? "their creates went unanswered")"
                    + (result.candidates.isEmpty
                        ? "" : "; channels that appeared: \(result.candidates.prefix(10).joined(separator: " "))")
                    + ". Run again, or with --forget-unresolved to create them anew (then delete the orphans)",
                prefix: "unresolved: "
            )
        }
        if let signal = signals.signal { throw ExitCode(128 + signal) }
        if let stopped = result.stopped {
            printError(stopped)
            throw ExitCode(3)
        }
        if !result.isComplete { throw ExitCode(1) }
    }
}

/// Channel ids from the arguments or an inventory's `channel_id` column.
struct ChannelSelection: ParsableArguments {
    @Argument(help: "Channel ids (base64).")
    var ids: [String] = []

    @Option(help: "An inventory CSV (from `channels create`): every channel in it.")
    var inventory: String?

    func validate() throws {
        guard self.ids.isEmpty != (self.inventory == nil) else {
            throw ValidationError("give channel ids or --inventory FILE")
        }
    }

    /// The ids, and the inventory when one was given: refused when its channels are another app's or
    /// environment's than `service` names.
    func selected(for service: BroadcastServiceOptions) throws -> ([String], ChannelInventory?) {
        guard let path = self.inventory else { return (self.ids, nil) }
        let inventory: ChannelInventory
        do {
            inventory = try ChannelInventory.read(path)
        } catch {
            throw UserError(error.description)
        }
        if let mismatch = inventory.mismatch(bundleID: service.bundleID, environment: service.environment) {
            throw UserError("--inventory \(path): \(mismatch)")
        }
        return (inventory.entries.map(\.channelID), inventory)
    }
}

/// `salvo channels get ID… | --inventory FILE`
struct GetChannels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print each channel's storage policy (and check it against the inventory)."
    )

    @OptionGroup var service: BroadcastServiceOptions
    @OptionGroup var selection: ChannelSelection

    func run() async throws {
        try await exitingOnUserError {
            let (ids, inventory) = try self.selection.selected(for: self.service)
            let expected = Dictionary(
                (inventory?.entries ?? []).map { ($0.channelID, $0.policy) },
                uniquingKeysWith: { first, _ in first }
            )
            let client = try await self.service.channelClient()
            var failed = 0
            for id in ids {
                switch await client.read(id) {
                case .success(let policy):
                    var line = "\(id) \(policy.name)"
                    if let want = expected[id], want != policy {
                        line += " (the inventory says \(want.name))"
                        failed += 1
                    }
                    print(line)
                case .failure(let failure):
                    failed += 1
                    printError("\(id): \(failure)", prefix: "refused: ")
                }
            }
            await client.exchanger.close()
            if failed > 0 { throw ExitCode(1) }
        }
    }
}

/// `salvo channels delete ID… | --inventory FILE`
struct DeleteChannels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete channels; with --inventory, the deleted ones leave the inventory (rewritten whole).",
        discussion: "A channel APNs no longer knows (ChannelNotRegistered) leaves the inventory too, and is reported."
    )

    @OptionGroup var service: BroadcastServiceOptions
    @OptionGroup var selection: ChannelSelection

    func run() async throws {
        try await exitingOnUserError {
            let (ids, inventory) = try self.selection.selected(for: self.service)
            let client = try await self.service.channelClient()
            var gone: Set<String> = []
            var failed = 0
            for id in ids {
                switch await client.delete(id) {
                case .success:
                    gone.insert(id)
                case .failure(let failure):
                    failed += 1
                    if failure.reason == "ChannelNotRegistered" { gone.insert(id) }
                    printError("\(id): \(failure)", prefix: "refused: ")
                }
            }
            await client.exchanger.close()
            if var inventory, let path = self.selection.inventory {
                inventory.entries.removeAll { gone.contains($0.channelID) }
                do throws(JobError) {
                    try inventory.write(to: path)
                } catch {
                    throw UserError(error.description)
                }
            }
            print("\(ids.count - failed) deleted, \(failed) refused")
            if failed > 0 { throw ExitCode(1) }
        }
    }
}

/// `salvo channels list`
struct ListChannels: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print every channel of the app (all-channels), one id a line; the count and what is left on stderr."
    )

    @OptionGroup var service: BroadcastServiceOptions

    func run() async throws {
        try await exitingOnUserError {
            let client = try await self.service.channelClient()
            let result = await client.list()
            await client.exchanger.close()
            switch result {
            case .success(let ids):
                for id in ids { print(id) }
                printError(
                    "\(ids.count) channels in \(self.service.environment.rawValue); "
                        + "\(max(0, channelLimitPerApp - ids.count)) of \(channelLimitPerApp) left",
                    prefix: ""
                )
            case .failure(let failure):
                throw UserError("cannot list the channels: \(failure)")
            }
        }
    }
}

/// `check --channel-inventory FILE`: the inventory's columns and every row (a base64 id, a policy, an environment,
/// a unique name and id), as check lines.
func channelInventoryChecks(_ path: String) -> [CheckResult] {
    let name = "channel inventory"
    let inventory: ChannelInventory
    let problems: [(line: Int?, message: String)]
    do {
        (inventory, problems) = try ChannelInventory.check(path)
    } catch {
        return [.fail(name, error.description)]
    }
    guard !problems.isEmpty else {
        let environments = Set(inventory.entries.map(\.environment.rawValue)).sorted().joined(separator: ", ")
        return [
            .ok(name, "\(path): \(inventory.entries.count) channels (\(environments.isEmpty ? "none" : environments))")
        ]
    }
    var results = problems.prefix(20).map { problem in
        CheckResult.fail(name, "\(path)\(problem.line.map { ":\($0)" } ?? ""): \(problem.message)")
    }
    if problems.count > 20 { results.append(.fail(name, "… and \(problems.count - 20) more problems")) }
    return results
}
