import Foundation
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// One line of a channel-creation journal (JSON, one object a line).
public struct ChannelJournalEvent: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable {
        /// The job's settings, the first line: a journal is for one app, environment and policy.
        case job
        /// Every channel of the app at the start of a run, before its first create: a channel not in it and not
        /// in the journal appeared since.
        case baseline
        /// About to send a create for `name`: written and synced before the request leaves.
        case intent
        /// APNs answered 201 with `id`.
        case created
        /// An intent without an answer, settled by reconciliation: `id` appeared since the run's baseline.
        case adopted
        /// APNs refused the create (`status`, `reason`): no channel was made; a later run tries again.
        case failed
        /// An intent the operator gave up on (`--forget-unresolved`): a later run creates the name again.
        case forgotten
    }

    public var kind: Kind
    public var run: Int?
    public var name: String?
    public var id: String?
    public var ids: [String]?
    public var at: String?
    public var status: Int?
    public var reason: String?
    public var bundleID: String?
    public var environment: BroadcastEnvironment?
    public var policy: MessageStoragePolicy?

    public init(_ kind: Kind, run: Int? = nil, name: String? = nil, id: String? = nil) {
        self.kind = kind
        self.run = run
        self.name = name
        self.id = id
    }
}

/// What a channel-creation journal says, folded from its events (pure).
public struct ChannelCreationState: Hashable, Sendable {
    /// The channel of each name that has one (created or adopted), in the order they were settled.
    public private(set) var entries: [ChannelInventory.Entry] = []
    public private(set) var channelOf: [String: String] = [:]
    /// Names whose last create was refused, with the refusal.
    public private(set) var failures: [String: ChannelFailure] = [:]
    /// Names with an intent and no outcome since, with the run of the intent, in intent order.
    public private(set) var openIntents: [(name: String, run: Int)] = []
    /// Each run's baseline.
    public private(set) var baselines: [Int: Set<String>] = [:]
    /// The job line, if written.
    public private(set) var job: ChannelJournalEvent?
    /// The last run number used.
    public private(set) var lastRun = 0

    public init() {}

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.entries == rhs.entries && lhs.failures == rhs.failures
            && lhs.openIntents.map(\.name) == rhs.openIntents.map(\.name) && lhs.baselines == rhs.baselines
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.entries)
    }

    /// Every channel id the journal knows as a name's.
    public var knownIDs: Set<String> { Set(self.channelOf.values) }

    public mutating func apply(_ event: ChannelJournalEvent) {
        switch event.kind {
        case .job:
            self.job = event
        case .baseline:
            let run = event.run ?? 0
            self.baselines[run] = Set(event.ids ?? [])
            self.lastRun = max(self.lastRun, run)
        case .intent:
            guard let name = event.name else { return }
            self.openIntents.removeAll { $0.name == name }
            self.openIntents.append((name, event.run ?? self.lastRun))
            self.lastRun = max(self.lastRun, event.run ?? 0)
        case .created, .adopted:
            guard let name = event.name, let id = event.id, self.channelOf[name] == nil,
                let job = self.job, let environment = job.environment, let policy = job.policy
            else { return }
            self.openIntents.removeAll { $0.name == name }
            self.failures[name] = nil
            self.channelOf[name] = id
            self.entries.append(
                ChannelInventory.Entry(
                    name: name,
                    channelID: id,
                    policy: policy,
                    environment: environment,
                    createdAt: event.at ?? "",
                    bundleID: job.bundleID
                )
            )
        case .failed:
            guard let name = event.name else { return }
            self.openIntents.removeAll { $0.name == name }
            self.failures[name] = ChannelFailure(status: event.status, reason: event.reason ?? "refused")
        case .forgotten:
            guard let name = event.name else { return }
            self.openIntents.removeAll { $0.name == name }
        }
    }
}

/// How the intents a run left without an answer are settled, from the app's channels now (pure).
///
/// The rule: a channel is attributed to an open intent only when it appeared since that run's baseline, is in no
/// name's row, has the job's storage policy, and the appearances are fully explained by this job, that is, no
/// channel of the other policy appeared and no more channels of the job's policy appeared than there are open
/// intents. Channels are interchangeable until a first broadcast, so the k new channels go to the first k open
/// intents in intent order, and the other intents are known to have created nothing (they are sent again). When
/// the appearances are not explained by this job (someone else creates channels for the app at the same time),
/// nothing is attributed: the intents stay open and the run stops, naming the candidates, rather than risk a
/// duplicate or a channel that is someone else's. The one thing the rule cannot see is another creator whose
/// channels exactly fill the gap; running one creator per app and environment at a time rules that out.
public struct ChannelReconciliation: Hashable, Sendable {
    public struct Adoption: Hashable, Sendable {
        public var name: String
        public var id: String

        public init(name: String, id: String) {
            self.name = name
            self.id = id
        }
    }

    /// Open intents settled by a channel that appeared.
    public var adopted: [Adoption] = []
    /// Open intents that made no channel: to create again.
    public var retry: [String] = []
    /// Open intents that cannot be settled, with the channels that could be theirs or someone else's.
    public var unprovable: [String] = []
    public var candidates: [String] = []
    /// Why nothing was attributed, when `unprovable` is not empty.
    public var explanation: String?

    public init() {}

    /// - Parameters:
    ///   - state: the journal's state (open intents, baselines, known ids).
    ///   - current: every channel of the app now (`all-channels`).
    ///   - policies: the storage policy of each channel in `current` not in a baseline or the journal (read one
    ///     by one); a channel missing here (its read failed) counts as one that cannot be explained.
    ///   - policy: the job's storage policy.
    public static func reconcile(
        _ state: ChannelCreationState,
        current: [String],
        policies: [String: MessageStoragePolicy],
        policy: MessageStoragePolicy
    ) -> ChannelReconciliation {
        var result = ChannelReconciliation()
        let intents = state.openIntents
        guard !intents.isEmpty else { return result }
        let runs = Set(intents.map(\.run))
        let known = state.knownIDs
        guard runs.count == 1, let run = runs.first, let baseline = state.baselines[run] else {
            result.unprovable = intents.map(\.name)
            result.explanation = "the open intents span runs without one baseline"
            return result
        }
        let appeared = current.filter { !baseline.contains($0) && !known.contains($0) }
        let ours = appeared.filter { policies[$0] == policy }
        let foreign = appeared.filter { policies[$0] != policy }
        guard foreign.isEmpty, ours.count <= intents.count else {
            result.unprovable = intents.map(\.name)
            result.candidates = appeared
            result.explanation =
                foreign.isEmpty
                ? "\(ours.count) channels appeared since the run began, more than its \(intents.count) unanswered creates"
                : "\(foreign.count) channels that this job did not create (another policy, or unreadable) appeared"
            return result
        }
        for (index, intent) in intents.enumerated() {
            if index < ours.count {
                result.adopted.append(Adoption(name: intent.name, id: ours[index]))
            } else {
                result.retry.append(intent.name)
            }
        }
        return result
    }

    /// The channels that need their policy read before `reconcile`: those in `current` that appeared since the
    /// open intents' baseline and are nobody's in the journal.
    public static func unknownChannels(_ state: ChannelCreationState, current: [String]) -> [String] {
        guard let run = state.openIntents.first?.run, let baseline = state.baselines[run] else { return [] }
        let known = state.knownIDs
        return current.filter { !baseline.contains($0) && !known.contains($0) }
    }
}

/// The journal file of a channel-creation job (`--journal DIR`: `DIR/channels.jsonl`): events appended as lines,
/// synced to the disk in batches (every intent is on the disk before its create leaves). A last line cut short by
/// a kill is ignored (and cut off) when the journal is opened again. Without a folder the events are kept in memory
/// only, so a run still reconciles its own unanswered creates before it ends.
public final class ChannelJournal {
    public private(set) var state = ChannelCreationState()
    private let descriptor: Int32
    public let path: String?
    private var pending: [UInt8] = []
    /// One run per journal (`JournalLock`), held as long as the journal is open.
    private let lock: JournalLock?

    /// Opens (or creates) the journal in `directory`, nil for one in memory.
    ///
    /// - Throws: `JobError(.output)` when the folder or file cannot be made or read; `JobError(.input)` for a line
    ///   that is not an event (a damaged or foreign file).
    public init(directory: String?) throws(JobError) {
        guard let directory else {
            self.descriptor = -1
            self.path = nil
            self.lock = nil
            return
        }
        // Two runs of one job at once would create each missing channel twice: the second is refused, naming the
        // first (the lock creates the folder).
        self.lock = try JournalLock.acquire(directory, waitOption: nil)
        let path = directory + "/channels.jsonl"
        self.path = path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw JobError(.output, "--journal: cannot open \(path): \(String(cString: strerror(errno)))")
        }
        self.descriptor = descriptor
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            close(descriptor)
            throw JobError(.output, "--journal: cannot read \(path): \(error)")
        }
        let decoder = JSONDecoder()
        var start = 0
        var lineNumber = 0
        var complete = 0
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "\n") {
            lineNumber += 1
            let line = bytes[start..<index]
            start = index + 1
            complete = start
            guard !line.isEmpty else { continue }
            guard let event = try? decoder.decode(ChannelJournalEvent.self, from: Data(line)) else {
                close(descriptor)
                throw JobError(.input, "\(path):\(lineNumber): not a channel journal line")
            }
            self.state.apply(event)
        }
        // A line cut short by a kill (no newline yet) was never acted on: its request had not been sent.
        if complete < bytes.count { _ = ftruncate(descriptor, off_t(complete)) }
        lseek(descriptor, 0, SEEK_END)
    }

    deinit {
        if self.descriptor >= 0 { close(self.descriptor) }
    }

    /// Adds `event` to the state and to the lines waiting for `sync`.
    public func append(_ event: ChannelJournalEvent) {
        self.state.apply(event)
        guard self.descriptor >= 0 else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a value of plain fields cannot fail.
        self.pending.append(contentsOf: (try? encoder.encode(event)) ?? Data())
        self.pending.append(UInt8(ascii: "\n"))
    }

    /// Writes and syncs what was appended.
    ///
    /// - Throws: `JobError(.output)` when the disk refuses (then nothing after may be sent).
    public func sync() throws(JobError) {
        guard self.descriptor >= 0, !self.pending.isEmpty else { return }
        var offset = 0
        while offset < self.pending.count {
            let written = self.pending.withUnsafeBytes {
                write(self.descriptor, $0.baseAddress! + offset, $0.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw JobError(
                    .output,
                    "--journal: cannot write \(self.path ?? ""): \(String(cString: strerror(errno)))"
                )
            }
            offset += written
        }
        self.pending.removeAll(keepingCapacity: true)
        guard fsync(self.descriptor) == 0 else {
            throw JobError(.output, "--journal: cannot sync \(self.path ?? ""): \(String(cString: strerror(errno)))")
        }
    }
}
