import Foundation
import NIOCore
import SalvoRows

/// Creates a channel for each name, resumably: every create's intent is on the disk before the request leaves, each
/// answer after it, and the inventory (rewritten whole) lists exactly the channels APNs confirmed. A rerun skips the
/// names that have a channel, settles the creates a killed run left unanswered (`ChannelReconciliation`) and creates
/// the rest, so no name ever gets two channels.
public struct ChannelCreation: Sendable {
    public var bundleID: String
    public var environment: BroadcastEnvironment
    public var policy: MessageStoragePolicy
    /// The names to give channels, in order (unique).
    public var names: [String]
    public var inventoryPath: String
    /// The journal folder; nil keeps the journal in memory (the run still settles its own unanswered creates).
    public var journalDirectory: String?
    /// Creates in flight at once.
    public var concurrency = 8
    /// The most channels the app may have (APNs: 10,000 per app and environment), checked before creating.
    public var limit = channelLimitPerApp
    /// Settle intents reconciliation cannot attribute by creating them again (possible orphans are listed).
    public var forgetUnresolved = false
    /// Asked to stop (a signal): no new create leaves, the ones in flight are answered, the inventory is written.
    public var stop: JobStop?
    /// Called after each batch with (settled names, names in the job).
    public var progress: (@Sendable (Int, Int) -> Void)?

    public init(
        bundleID: String,
        environment: BroadcastEnvironment,
        policy: MessageStoragePolicy,
        names: [String],
        inventoryPath: String
    ) {
        self.bundleID = bundleID
        self.environment = environment
        self.policy = policy
        self.names = names
        self.inventoryPath = inventoryPath
    }

    public struct Result: Sendable {
        /// Channels made by this run.
        public var created = 0
        /// Unanswered creates of a run settled by reconciliation.
        public var adopted = 0
        /// Names that already had a channel when the run began.
        public var alreadyCreated = 0
        /// Names whose create was refused, with Apple's reason.
        public var failures: [(name: String, failure: ChannelFailure)] = []
        /// Names whose create may or may not have made a channel (reconciliation could not tell).
        public var unresolved: [String] = []
        /// Channels that appeared and could not be attributed (someone's, perhaps this job's).
        public var candidates: [String] = []
        /// Why reconciliation could not attribute them.
        public var explanation: String?
        /// Why the run stopped before every name was tried (a job-wide refusal, the channel limit, a signal).
        public var stopped: String?
        /// The app's channels after the run (listed once more at its end), when known.
        public var channelsInApp: Int?
        /// Channels in the inventory written.
        public var inventoryCount = 0

        public var isComplete: Bool { self.failures.isEmpty && self.unresolved.isEmpty && self.stopped == nil }
    }

    /// Reasons after which every other create would be refused as well: the run stops. Beside the app-wide ones
    /// (`ChannelFailure.isAppWide`), every create of a run is the same request: the channel limit or a bad body
    /// refuses them all.
    static let jobWideReasons: Set<String> = ["CannotCreateChannelConfig", "BadRequestParams", "BadRequestPayload"]

    /// Runs the job over `client`'s connection.
    ///
    /// - Throws: `JobError` when the journal belongs to another job or a file cannot be written; `ChannelFailure`
    ///   when the app's channels cannot be listed (the limit cannot be checked).
    public func run(client: ChannelClient) async throws -> Result {
        if let problem = ChannelManagement.problem(bundleID: self.bundleID) {
            throw JobError(.configuration, "--bundle-id: \(problem)")
        }
        let journal = try ChannelJournal(directory: self.journalDirectory)
        try self.checkJob(journal)
        var result = Result()
        let existing = try self.existingInventory()
        if let mismatch = existing.mismatch(bundleID: self.bundleID, environment: self.environment, policy: self.policy)
        {
            throw JobError(.configuration, "--inventory \(self.inventoryPath): \(mismatch): give another --inventory")
        }
        let alreadyNamed = Set(existing.entries.map(\.name)).union(journal.state.channelOf.keys)
        result.alreadyCreated = self.names.filter { alreadyNamed.contains($0) }.count
        do {
            try await self.create(journal: journal, existing: existing, client: client, into: &result)
        } catch {
            // The inventory is written on every way out: what did succeed is in it.
            _ = try? self.writeInventory(existing: existing, journal: journal)
            throw error
        }
        result.inventoryCount = try self.writeInventory(existing: existing, journal: journal)
        return result
    }

    private func create(
        journal: ChannelJournal,
        existing: ChannelInventory,
        client: ChannelClient,
        into result: inout Result
    ) async throws {

        // Creates a killed run left unanswered, settled before anything new is sent.
        var current = try await self.listed(client)
        if !journal.state.openIntents.isEmpty {
            guard try await self.reconcile(journal, current: current, client: client, into: &result) != nil else {
                return
            }
            current = try await self.listed(client)
        }
        let settledNames = Set(existing.entries.map(\.name)).union(journal.state.channelOf.keys)
        let todo = self.names.filter { !settledNames.contains($0) }
        let left = max(0, self.limit - current.count)
        result.channelsInApp = current.count
        guard todo.count <= left else {
            result.stopped =
                "\(todo.count) channels to create, but the app has \(current.count) of its \(self.limit) in "
                + "\(self.environment.rawValue): only \(left) left (delete some with `salvo channels delete`)"
            return
        }
        guard !todo.isEmpty else { return }

        let run = journal.state.lastRun + 1
        var baseline = ChannelJournalEvent(.baseline, run: run)
        baseline.ids = current
        journal.append(baseline)
        try journal.sync()

        var queue = todo[...]
        var lastInventory = NIODeadline.now()
        // Names sent again in this run after reconciliation found they made nothing (bounded rounds).
        var rounds = 0
        while true {
            while !queue.isEmpty, result.stopped == nil {
                if let reason = self.stop?.reason {
                    result.stopped = reason
                    break
                }
                guard client.exchanger.isActive else {
                    result.stopped = "the connection to \(client.exchanger.endpoint.address) closed; run again to go on"
                    break
                }
                let batch = Array(queue.prefix(self.concurrency))
                queue = queue.dropFirst(batch.count)
                for name in batch { journal.append(ChannelJournalEvent(.intent, run: run, name: name)) }
                try journal.sync()
                let outcomes = await self.send(batch, client: client)
                var again: [String] = []
                for (name, outcome) in outcomes {
                    switch outcome {
                    case .created(let id):
                        var event = ChannelJournalEvent(.created, run: run, name: name, id: id)
                        event.at = Self.now()
                        journal.append(event)
                        result.created += 1
                    case .refused(let failure):
                        journal.append(Self.failed(name, failure, run: run))
                        result.failures.append((name, failure))
                        if failure.isAppWide || Self.jobWideReasons.contains(failure.reason) {
                            result.stopped = "APNs refused a create with \(failure): every other would be refused too"
                        }
                    case .notCreated(let failure):
                        // Retried below within the policy's attempts; its intent is closed so a kill leaves no doubt.
                        journal.append(Self.failed(name, failure, run: run))
                        again.append(name)
                    case .unknown:
                        break
                    }
                }
                try journal.sync()
                if !again.isEmpty {
                    await client.pause(attempts: 1 + rounds)
                    queue = again[...] + queue
                    rounds += 1
                    if !client.retry.allowsRetry(after: rounds) {
                        for name in again {
                            result.failures.append(
                                (
                                    name,
                                    journal.state.failures[name]
                                        ?? ChannelFailure(status: 429, reason: "TooManyRequests")
                                )
                            )
                        }
                        queue = queue.dropFirst(again.count)
                        result.stopped = result.stopped ?? "APNs kept refusing creates for now (429); run again later"
                    }
                }
                self.progress?(journal.state.channelOf.count, self.names.count)
                if NIODeadline.now() - lastInventory > .milliseconds(250) {
                    _ = try self.writeInventory(existing: existing, journal: journal)
                    lastInventory = .now()
                }
            }
            // Creates left without an answer in this run: settled now from the app's channels.
            guard !journal.state.openIntents.isEmpty, client.exchanger.isActive else { break }
            let now = try await self.listed(client)
            guard let retry = try await self.reconcile(journal, current: now, client: client, into: &result) else {
                break
            }
            guard !retry.isEmpty, rounds < client.retry.maximumAttempts, result.stopped == nil else { break }
            rounds += 1
            queue = retry[...]
        }
        result.unresolved = journal.state.openIntents.map(\.name)
        // The app's channels after the run: listed again, or (when the list fails) those before and this run's.
        if let listed = try? await self.listed(client) {
            result.channelsInApp = listed.count
        } else {
            result.channelsInApp = result.channelsInApp.map { $0 + result.created }
        }
    }

    /// Settles open intents from `current`: the names that made no channel (to create again), or nil (with the
    /// result saying why) when the intents cannot be attributed.
    private func reconcile(
        _ journal: ChannelJournal,
        current: [String],
        client: ChannelClient,
        into result: inout Result
    ) async throws -> [String]? {
        var policies: [String: MessageStoragePolicy] = [:]
        for id in ChannelReconciliation.unknownChannels(journal.state, current: current) {
            if case .success(let policy) = await client.read(id) { policies[id] = policy }
        }
        let settled = ChannelReconciliation.reconcile(
            journal.state,
            current: current,
            policies: policies,
            policy: self.policy
        )
        for adoption in settled.adopted {
            var event = ChannelJournalEvent(.adopted, name: adoption.name, id: adoption.id)
            event.at = Self.now()
            journal.append(event)
            result.adopted += 1
        }
        for name in settled.retry { journal.append(ChannelJournalEvent(.forgotten, name: name)) }
        if !settled.unprovable.isEmpty {
            result.candidates = settled.candidates
            result.explanation = settled.explanation
            if self.forgetUnresolved {
                for name in settled.unprovable { journal.append(ChannelJournalEvent(.forgotten, name: name)) }
            } else {
                result.unresolved = settled.unprovable
                result.stopped =
                    "\(settled.unprovable.count) creates of an earlier run went unanswered and cannot be attributed: "
                    + (settled.explanation ?? "")
                try journal.sync()
                return nil
            }
        }
        try journal.sync()
        return settled.retry
    }

    /// Sends one create per name at once; the outcomes in name order.
    private func send(_ names: [String], client: ChannelClient) async -> [(String, ChannelClient.CreateOutcome)] {
        let policy = self.policy
        return await withTaskGroup(of: (Int, ChannelClient.CreateOutcome).self) { group in
            for index in names.indices {
                group.addTask { (index, await client.create(policy: policy)) }
            }
            var outcomes = [ChannelClient.CreateOutcome?](repeating: nil, count: names.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return names.indices.map { (names[$0], outcomes[$0] ?? .unknown("no outcome")) }
        }
    }

    private func listed(_ client: ChannelClient) async throws -> [String] {
        switch await client.list() {
        case .success(let ids): return ids
        case .failure(let failure): throw failure
        }
    }

    private func checkJob(_ journal: ChannelJournal) throws {
        if let job = journal.state.job {
            guard job.bundleID == self.bundleID, job.environment == self.environment, job.policy == self.policy else {
                throw JobError(
                    .configuration,
                    "--journal \(self.journalDirectory ?? ""): the journal is for \(job.bundleID ?? "?") in "
                        + "\(job.environment?.rawValue ?? "?") with policy \(job.policy?.name ?? "?"), not "
                        + "\(self.bundleID) in \(self.environment.rawValue) with \(self.policy.name)"
                )
            }
            return
        }
        var job = ChannelJournalEvent(.job)
        job.bundleID = self.bundleID
        job.environment = self.environment
        job.policy = self.policy
        journal.append(job)
        try journal.sync()
    }

    private func existingInventory() throws -> ChannelInventory {
        guard FileManager.default.fileExists(atPath: self.inventoryPath) else { return ChannelInventory() }
        return try ChannelInventory.read(self.inventoryPath)
    }

    /// The rows of the inventory that was there before, then the journal's (a name once).
    @discardableResult
    private func writeInventory(existing: ChannelInventory, journal: ChannelJournal) throws -> Int {
        let fromJournal = journal.state.entries
        let names = Set(fromJournal.map(\.name))
        let inventory = ChannelInventory(entries: existing.entries.filter { !names.contains($0.name) } + fromJournal)
        try inventory.write(to: self.inventoryPath)
        return inventory.entries.count
    }

    private static func failed(_ name: String, _ failure: ChannelFailure, run: Int) -> ChannelJournalEvent {
        var event = ChannelJournalEvent(.failed, run: run, name: name)
        event.status = failure.status
        event.reason = failure.reason
        return event
    }

    static func now() -> String { UnixTime.iso8601(Int64(Date().timeIntervalSince1970)) }
}
