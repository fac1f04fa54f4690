import APNSWire
import NIOCore
import SalvoEngine

extension HTTP2ConnectionStateMachine {
    /// What the driver does after an event, in this order: reset streams, PING (then one flush), note, stop,
    /// renew, give back, ready, retire, close, write.
    struct Actions: Hashable {
        /// Streams to cancel with RST_STREAM (CANCEL): their deadlines passed.
        var resetStreams: [Int32] = []
        var sendPing = false
        /// A connection error to note for the report.
        var note: String?
        /// Stop the whole job (credentials refused).
        var stopJob: HTTP2JobStop?
        /// Renew the provider token after `bearer` was refused as expired; answer with `tokenRenewed`.
        var renewToken: TokenRenewal?
        /// Hand `takeResults()` to the job.
        var giveBack = false
        /// The connection is up (the server's first SETTINGS): the pool's failure count restarts.
        var ready = false
        /// This connection takes no new rows: ask the pool for a replacement now.
        var retire = false
        var close = false
        /// Look for rows to write (`roomToWrite`).
        var writeRequests = false
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
