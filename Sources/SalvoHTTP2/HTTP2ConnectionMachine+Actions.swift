import APNSWire
import NIOCore
import SalvoRows

extension HTTP2ConnectionMachine {
    /// One thing the driver does after an event.
    enum Action: Hashable {
        /// Cancel these streams with RST_STREAM (CANCEL): their deadlines passed.
        case resetStreams([Int32])
        case sendPing
        /// A connection error to note for the report.
        case note(String)
        /// Stop the whole job (credentials refused).
        case stopJob(HTTP2JobStop)
        /// Renew the provider token after the bearer was refused as expired; answer with `tokenRenewed`.
        case renewToken(TokenRenewal)
        /// Hand `takeResults()` to the job.
        case giveBack
        /// The connection is up (the server's first SETTINGS): the pool's failure count restarts.
        case ready
        /// This connection takes no new rows: ask the pool for a replacement now.
        case retire
        case close
        /// Look for rows to write (`roomToWrite`).
        case writeRequests
        /// The machine got an event its state rules out (a driver's mistake): nothing changed; the driver notes it
        /// as a connection error.
        case impossible(ImpossibleEvent)

        /// The order the driver carries actions out in: resets and PING first (then one flush), note, stop, renew,
        /// give back, ready, retire, close, write.
        var rank: Int {
            switch self {
            case .resetStreams: 0
            case .sendPing: 1
            case .impossible: 2
            case .note: 3
            case .stopJob: 4
            case .renewToken: 5
            case .giveBack: 6
            case .ready: 7
            case .retire: 8
            case .close: 9
            case .writeRequests: 10
            }
        }

        /// Whether the action writes a control frame (reset, PING) that goes out in one flush with the others.
        var writesControlFrame: Bool { self.rank <= 1 }
    }

    /// An event the machine's state rules out, by name.
    enum ImpossibleEvent: String, Hashable, Sendable {
        /// `wokeUp` without a wake-up asked for (`noRowsReady`).
        case wakeUpNotScheduled = "a wake-up that was not scheduled"
    }

    /// What the driver does after an event: at most one action of each kind, in `Action.rank` order (an action
    /// added twice keeps the last). Empty on most events of the hot path (an answer that settles its row), which
    /// then allocate nothing.
    struct Actions: Hashable, Sequence {
        private(set) var list: [Action] = []

        init() {}

        init(_ actions: Action...) {
            for action in actions { self.append(action) }
        }

        var isEmpty: Bool { self.list.isEmpty }

        /// Adds `action` in its place, replacing one of the same kind.
        mutating func append(_ action: Action) {
            let rank = action.rank
            var index = self.list.endIndex
            while index > 0, self.list[index - 1].rank >= rank { index -= 1 }
            if index < self.list.endIndex, self.list[index].rank == rank {
                self.list[index] = action
            } else {
                self.list.insert(action, at: index)
            }
        }

        /// Takes `action` out, if it is there.
        mutating func remove(_ action: Action) {
            self.list.removeAll { $0 == action }
        }

        func makeIterator() -> IndexingIterator<[Action]> { self.list.makeIterator() }
    }

    /// A row whose answer was ExpiredProviderToken, and the token that request carried.
    struct TokenRenewal: Hashable {
        var item: HTTP2WorkItem
        var bearer: ProviderToken.Bearer
    }

    /// What a connection hands back to its job in one batch.
    struct Results {
        var outcomes: RowOutcomes
        var deliveries: [HTTP2Delivery]
        /// Rows settled for good.
        var finals: Int
        /// Rows to send again, at their `notBefore`.
        var retries: [HTTP2WorkItem]
        /// 429 answers that cut the flight window since the last batch, and the smallest window they left.
        var flightCuts = 0
        var smallestFlightWindow: Int?
        /// Streams the connection may have in flight now (`streamLimit`).
        var streamLimit = 0
        /// The shortest time from a request to its answer since the last batch.
        var roundTrip: TimeAmount?
        /// The time from request to answer of the batch's last answer: one sample per batch for the latency
        /// metric, never one per request.
        var answerSample: TimeAmount?
        /// The last answer of the batch, or when a retry the server asked to wait for is due: the job's progress
        /// (`HTTP2ProgressWatch`); nil when the batch holds no answer.
        var progressUntil: NIODeadline?
    }

    /// Why the job stops when the service refuses the credentials, with what to check.
    static func stop(for reason: APNSReason, status: Int) -> HTTP2JobStop {
        let advice: String
        switch reason {
        case .badCertificate, .badCertificateEnvironment:
            advice = "the client certificate is wrong for this server or environment (production vs sandbox)"
        case .invalidProviderToken, .missingProviderToken:
            advice = "the provider token is refused: check the key id, team id and the .p8 key"
        case .unrelatedKeyIdInToken:
            advice =
                "the provider token's key is not the key this connection started with (a key changed mid-job, or a "
                + "team-scoped and a topic-specific key mixed): send with one key; a new run opens new connections"
        case .badEnvironmentKeyIdInToken:
            advice =
                "the signing key is scoped to the other environment: use a key for this gateway (sandbox vs production)"
        case .topicDisallowed:
            advice = "this topic may not be pushed with these credentials"
        case .tooManyProviderTokenUpdates:
            advice =
                "another process signed a token with this key less than 20 minutes ago; let every process share "
                + "one token through the same --token-cache file, or run again in 20 minutes"
        default:
            advice = "the credentials are refused"
        }
        return HTTP2JobStop(
            reason: reason.rawValue,
            message: "APNs answered \(status) \(reason.rawValue): \(advice); the job stopped rather than retry"
        )
    }
}
