import APNSWire
import DequeModule
import NIOCore
import NIOHTTP2
import SalvoRows

/// The protocol state of one HTTP/2 connection to APNs, with no I/O: it takes the connection's events (opened,
/// SETTINGS, room to write, answers, resets, GOAWAY, PING acks, ticks, closed) with the time they happened, and
/// answers with the `Actions` its driver (`HTTP2ConnectionCodec`) carries out: write requests, send PING,
/// reset streams, close, retire, give results back, stop the job, wake up later.
///
/// Streams in flight are bounded by the server's `SETTINGS_MAX_CONCURRENT_STREAMS` as it changes, by the job's
/// own cap, and by 1 until the service has accepted the credentials. Every stream has a deadline. A connection
/// that has been silent for the ping interval, or whose request missed its deadline, is checked with PING and
/// takes no new rows until the answer comes; without an answer in time it closes, and its rows in flight go back
/// to the queue (uncertain: they may have been delivered). After GOAWAY, streams above the last stream id (never
/// processed) go back to the queue at once without counting an attempt, the rest finish, and the connection
/// closes; a connection that has used up its stream ids is retired the same way.
///
/// 429 answers shrink the flight: the connection's own window (`flightWindow`) halves what was in flight, at most
/// once per flight (a 429 for a stream written before the last cut does not cut again), then grows by
/// `additiveIncrease` streams per window's worth of accepted answers until it reaches the server's limit and goes
/// away. A 429 with `Retry-After` also holds the connection's new requests until then. The window is per
/// connection, not per job: APNs limits and answers each connection on its own, a connection's answers arrive on
/// its event loop where the window is read and changed without a lock, and a job of N connections each halving on
/// the 429s it sees shrinks its total flight in proportion to where the 429s come from; `--rate` is the job-wide
/// cap. A replacement connection starts without a window.
///
/// A refused stream (RST_STREAM REFUSED_STREAM) was not processed: it is sent again after a backoff without using
/// one of the row's attempts (`HTTP2WorkItem.refusals` bounds it separately: a row refused `maximumRefusals` times
/// is left unsent, listed as unsettled, never resent forever).
///
/// A server that lets nothing through is told apart here, and the job's give-up (`HTTP2ProgressWatch`) ends the
/// job: SETTINGS that do not come within `settingsTimeout` close the connection; a stream window smaller than one
/// request body stops the job at once (no request could ever be written whole); the first refused stream, a limit of
/// 0 streams and a GOAWAY before any answer are noted once per connection, as the causes a stopped job names.
/// `answers` tells the driver's slot whether the connection was of any use, for its reconnect backoff.
///
/// Every row's end is recorded in a `RowOutcomes`; `takeResults()` hands a batch of them to the job. Jitter comes
/// from the injected generator and time from the events, so tests drive it with a fake clock and a fixed seed.
///
/// A value owned by one driver, confined to its event loop.
struct HTTP2ConnectionMachine {
    let configuration: Configuration
    private(set) var state = State.connecting
    /// Whether the server's SETTINGS have arrived.
    private(set) var isReady = false
    /// Whether the service has answered anything but 403: until then, one stream at a time. A token is only
    /// checked by the first response, and a certificate for the wrong environment or topic too; one round trip
    /// per connection buys a job that stops after one refused request rather than a thousand.
    private(set) var authenticated = false
    // Streams and deadlines are kept beside the state rather than in its cases, so that the hot path updates
    // them in place (an enum payload would be copied on every change).
    private var streams: [Int32: Stream] = [:]
    /// Stream ids in send order with their deadlines; entries of finished streams are dropped from the front.
    private var deadlines = Deque<(id: Int32, deadline: NIODeadline)>()
    /// The next stream's id; past `Int32.max` once the ids are used up (an `Int`, so it steps past without
    /// overflow).
    private var nextStreamID: Int
    private var lastActivity: NIODeadline
    private var openedAt: NIODeadline
    /// Streams answered on this connection (any status).
    private(set) var answers = 0
    /// Whether the connection closed because the job had no row left for it (`noRowsLeft`).
    private(set) var finished = false
    /// Causes already noted for this connection (one note each, not one per stream).
    private var notedRefusal = false
    /// The last answer read, or when a retry the server asked for is due (`HTTP2ProgressWatch`).
    private var progressUntil: NIODeadline?
    private var pingSentAt: NIODeadline?
    private var wakeUpScheduled = false
    private var random: SplitMix64
    private var outcomes: RowOutcomes
    private var deliveries: [HTTP2Delivery] = []
    private var finals = 0
    private var retries: [HTTP2WorkItem] = []
    /// The flight window 429 answers leave (`HTTP2FlightWindow`).
    private var flight: HTTP2FlightWindow
    /// After a 429 with `Retry-After`: no new requests before this time.
    private(set) var holdUntil: NIODeadline?
    private var roundTrip: TimeAmount?
    private var answerSample: TimeAmount?

    /// - Parameters:
    ///   - outcomes: empty outcomes with the job's policy and files.
    ///   - firstStreamID: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator for backoff jitter.
    ///   - now: when the connection opened.
    init(
        configuration: Configuration,
        outcomes: RowOutcomes,
        firstStreamID: Int32 = 1,
        random: SplitMix64,
        now: NIODeadline
    ) {
        self.configuration = configuration
        self.flight = HTTP2FlightWindow(additiveIncrease: configuration.additiveIncrease)
        self.outcomes = outcomes
        self.nextStreamID = Int(firstStreamID)
        self.random = random
        self.lastActivity = now
        self.openedAt = now
    }

    /// Streams in flight.
    var openStreams: Int { self.streams.count }

    /// Whether the stream is in flight (written, its answer not yet settled).
    func isInFlight(streamID: Int32) -> Bool { self.streams[streamID] != nil }

    /// The flight window 429 answers left (streams), nil when there is none.
    var flightWindow: Int? { self.flight.streams }

    /// Streams this connection may have in flight now: the server's limit, our cap, the flight window, and at most
    /// 1 until the credentials pass (0 when the server allows none); 0 before SETTINGS or once draining.
    var streamLimit: Int {
        guard case .open(let remote) = self.state else { return 0 }
        guard self.authenticated else { return min(1, remote) }
        return min(remote, self.configuration.maximumStreams, self.flight.limit)
    }

    /// How often the driver calls `tick`: a tenth of the request timeout, 5–100 ms (one timer per connection,
    /// not one per request).
    var tickInterval: TimeAmount {
        .milliseconds(min(100, max(5, self.configuration.requestTimeout.nanoseconds / 10_000_000)))
    }

    // MARK: Writing

    /// How many new requests may be written now: 0 before SETTINGS, while draining, while a PING is unanswered
    /// (the connection may be dead, and rows wait rather than join those that may be lost), or when the channel
    /// is not writable.
    func roomToWrite(isWritable: Bool) -> Int {
        guard case .open = self.state, self.pingSentAt == nil, self.holdUntil == nil, isWritable else { return 0 }
        let limit = self.streamLimit
        // A client's stream ids are odd and at most 2^31 − 1, never reused: the last ones bound a batch.
        let idsLeft = max(0, (Int(Int32.max) - self.nextStreamID) / 2 + 1)
        return max(0, min(limit - self.streams.count, self.configuration.batchLimit, idsLeft))
    }

    /// Records `items` as written now on new streams with consecutive ids: the first gets `firstStreamID`, each
    /// next one the id 2 above. At most `roomToWrite` items.
    mutating func writing(
        _ items: some Collection<HTTP2WorkItem>,
        bearer: ProviderToken.Bearer?,
        now: NIODeadline
    ) -> (firstStreamID: Int32, actions: Actions) {
        precondition(items.count <= self.roomToWrite(isWritable: true), "more requests than room")
        let first = Int32(self.nextStreamID)
        let deadline = now + self.configuration.requestTimeout
        for item in items {
            let id = Int32(self.nextStreamID)
            self.nextStreamID += 2
            self.streams[id] = Stream(item: item, bearer: bearer, sentAt: now)
            self.deadlines.append((id, deadline))
            self.outcomes.writing(item.row)
        }
        var actions = Actions()
        // Out of stream ids: retired like a connection that got GOAWAY. Its streams finish, it closes, and the
        // replacement opens now.
        if self.nextStreamID > Int(Int32.max) { self.retire(lastStreamID: Int32(self.nextStreamID - 2), &actions) }
        return (first, actions)
    }

    /// No row could be taken although there was room: when to look again (when a delayed row is due, or soon,
    /// since other connections may give rows back); nil when a wake-up is already scheduled or no rows are wanted.
    mutating func noRowsReady(now: NIODeadline, nextDelayed: NIODeadline?) -> NIODeadline? {
        guard case .open = self.state, !self.wakeUpScheduled else { return nil }
        self.wakeUpScheduled = true
        let soon = now + self.configuration.lookAgain
        guard let due = nextDelayed else { return soon }
        return max(now + .milliseconds(1), min(soon, due))
    }

    /// The wake-up from `noRowsReady` came.
    mutating func wokeUp() -> Actions {
        guard self.wakeUpScheduled else { return Actions(.impossible(.wakeUpNotScheduled)) }
        self.wakeUpScheduled = false
        return Actions(.writeRequests)
    }

    // MARK: Reading

    /// The connection is open (TCP, and TLS when used): it is alive from now on.
    mutating func opened(now: NIODeadline) {
        self.lastActivity = now
        self.openedAt = now
    }

    /// Any frame arrived: the connection is alive.
    mutating func frameReceived(now: NIODeadline) {
        self.lastActivity = now
    }

    /// The server's SETTINGS, with its `SETTINGS_MAX_CONCURRENT_STREAMS` if they name it (no limit until one is
    /// named) and its `SETTINGS_INITIAL_WINDOW_SIZE` if they name it: a stream window smaller than the job's largest
    /// body holds every request, so the job stops with the cause rather than wait.
    mutating func settingsReceived(
        maximumConcurrentStreams: Int?,
        initialWindowSize: Int? = nil,
        now: NIODeadline
    ) -> Actions {
        self.lastActivity = now
        var actions = Actions()
        if let window = initialWindowSize, window < self.configuration.largestBody, self.state != .closed {
            let message =
                "the server's stream window (SETTINGS_INITIAL_WINDOW_SIZE \(window) bytes) is smaller than one payload "
                + "(\(self.configuration.largestBody) bytes): no request can be sent whole; the job stopped rather than "
                + "wait"
            actions.append(.stopJob(HTTP2JobStop(reason: nil, message: message)))
        }
        if maximumConcurrentStreams == 0, self.state != .closed {
            actions.append(.note("the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0)"))
        }
        if !self.isReady, self.state != .closed {
            self.isReady = true
            actions.append(.ready)
        }
        switch self.state {
        case .connecting:
            self.state = .open(remoteMaximumStreams: maximumConcurrentStreams ?? Int.max)
        case .open(let remote):
            self.state = .open(remoteMaximumStreams: maximumConcurrentStreams ?? remote)
        case .draining, .closed:
            break
        }
        return actions
    }

    /// A stream's HEADERS: the answer's `:status`, `apns-id` and `Retry-After` (seconds). Informational (1xx)
    /// blocks are skipped; the answer is settled at the end of the stream.
    mutating func headersReceived(
        streamID: Int32,
        status: Int?,
        apnsID: String?,
        apnsUniqueID: String? = nil,
        retryAfter: Int64?,
        endStream: Bool,
        now: NIODeadline
    ) -> Actions {
        self.lastActivity = now
        guard var stream = self.streams[streamID] else { return Actions() }
        if stream.status == nil {
            guard let status, status >= 200 else { return Actions() }
            stream.status = status
            stream.apnsID = apnsID
            stream.apnsUniqueID = apnsUniqueID
            stream.retryAfter = retryAfter
        }
        if endStream {
            self.streams[streamID] = nil
            return self.finish(stream, streamID: streamID, now: now)
        }
        self.streams[streamID] = stream
        return Actions()
    }

    /// A stream's DATA: the error body (a larger one than 4 KiB is cut rather than held).
    mutating func dataReceived(streamID: Int32, bytes: ByteBuffer, endStream: Bool, now: NIODeadline) -> Actions {
        self.lastActivity = now
        guard var stream = self.streams[streamID] else { return Actions() }
        var bytes = bytes
        let room = 4096 - (stream.body?.readableBytes ?? 0)
        if room > 0, let slice = bytes.readSlice(length: min(room, bytes.readableBytes)), slice.readableBytes > 0 {
            if stream.body == nil {
                stream.body = slice
            } else {
                var body = stream.body!
                stream.body = nil
                body.writeImmutableBuffer(slice)
                stream.body = body
            }
        }
        if endStream {
            self.streams[streamID] = nil
            return self.finish(stream, streamID: streamID, now: now)
        }
        self.streams[streamID] = stream
        return Actions()
    }

    /// A stream ended without its answer (RST_STREAM from the server, or closed by the protocol layer): a
    /// refused stream was not processed and is retried; one above a GOAWAY's last stream id neither, and goes
    /// back without counting an attempt; otherwise the notification may or may not have been delivered.
    mutating func streamClosed(streamID: Int32, code: HTTP2ErrorCode, now: NIODeadline) -> Actions {
        self.lastActivity = now
        guard let stream = self.streams.removeValue(forKey: streamID) else { return Actions() }
        self.dropFinishedDeadlines()
        var actions = Actions(.giveBack)
        if code == .refusedStream {
            if !self.notedRefusal {
                self.notedRefusal = true
                actions.append(.note("the server refused a stream (REFUSED_STREAM): it did not process it"))
            }
            self.refused(stream.item, now: now)
        } else if case .draining(let last) = self.state, streamID > last {
            self.outcomes.resend()
            self.retries.append(stream.item)
        } else {
            self.uncertain(stream.item, now: now)
        }
        self.closeIfDrained(&actions)
        return actions
    }

    /// GOAWAY: streams above `lastStreamID` were never processed and go back to the queue without counting an
    /// attempt; the others finish; no new rows; the pool opens a replacement. A `reason` that stops the job
    /// (the credentials are refused) stops it.
    mutating func goAwayReceived(lastStreamID: Int32, reason: APNSReason?, now: NIODeadline) -> Actions {
        self.lastActivity = now
        var actions = Actions()
        guard self.state != .closed else { return actions }
        if self.answers == 0 {
            actions.append(.note("GOAWAY (last stream \(lastStreamID)) before any answer on the connection"))
        }
        self.retire(lastStreamID: lastStreamID, &actions)
        let cut = self.streams.keys.filter { $0 > lastStreamID }.sorted()
        for id in cut {
            self.outcomes.resend()
            self.retries.append(self.streams.removeValue(forKey: id)!.item)
        }
        self.dropFinishedDeadlines()
        if let reason, reason.stopsTheJob {
            actions.append(.stopJob(Self.stop(for: reason, status: reason.status ?? 403)))
        }
        actions.append(.giveBack)
        self.closeIfDrained(&actions)
        return actions
    }

    mutating func pingAcknowledged(now: NIODeadline) -> Actions {
        self.lastActivity = now
        guard self.pingSentAt != nil else { return Actions() }
        self.pingSentAt = nil
        return Actions(.writeRequests)
    }

    /// The end of a read batch: the answers go back to the job at once, and freed streams take new rows.
    mutating func readComplete() -> Actions {
        var actions = Actions()
        if self.hasResults { actions.append(.giveBack) }
        actions.append(.writeRequests)
        return actions
    }

    /// The driver renewed the token (`Actions.renewToken`): the row goes again at once, or, when the token could
    /// not be renewed (the clocks disagree), the job stops and the row goes back unsent.
    mutating func tokenRenewed(_ renewal: TokenRenewal, result: ProviderToken.Renewal, now: NIODeadline) -> Actions {
        var actions = Actions(.giveBack)
        switch result {
        case .renewed:
            self.retryLater(renewal.item, status: 403, reason: .expiredProviderToken, backoff: false, now: now)
        case .refused(let message):
            self.refusedForToken(renewal.item)
            actions.append(.stopJob(HTTP2JobStop(reason: APNSReason.expiredProviderToken.rawValue, message: message)))
        }
        return actions
    }

    // MARK: Time and the end

    /// Deadlines and health checks. Requests past their deadline are reset and uncertain; then a PING checks the
    /// connection. A connection silent for the ping interval (idle or not) is checked too: the peer may be gone
    /// without a word (a NAT that dropped the flow, a server that hung), which streams cannot tell since their
    /// deadlines are long and a late answer is not an error. An unanswered PING closes the connection, and its
    /// rows go back to the queue at once (closing TLS may wait seconds for a peer that is gone).
    mutating func tick(now: NIODeadline) -> Actions {
        var actions = Actions()
        guard self.state != .closed else { return actions }
        if !self.isReady, let timeout = self.configuration.settingsTimeout, now - self.openedAt >= timeout {
            // Nothing was written before SETTINGS, so nothing is in flight: the connection only closes.
            actions.append(.note("no SETTINGS from the server within \(timeout) of connecting"))
            self.abandonStreams(now: now)
            self.state = .closed
            actions.append(.close)
            if self.hasResults { actions.append(.giveBack) }
            return actions
        }
        if let hold = self.holdUntil, now >= hold {
            self.holdUntil = nil
            actions.append(.writeRequests)
        }
        var resets: [Int32] = []
        while let first = self.deadlines.first, first.deadline <= now {
            self.deadlines.removeFirst()
            guard let stream = self.streams.removeValue(forKey: first.id) else { continue }
            resets.append(first.id)
            self.uncertain(stream.item, now: now)
        }
        let cancelled = !resets.isEmpty
        if cancelled { actions.append(.resetStreams(resets)) }
        if let sent = self.pingSentAt {
            if now - sent > self.configuration.pingTimeout {
                actions.append(.note("no PING answer within \(self.configuration.pingTimeout); closing the connection"))
                self.abandonStreams(now: now)
                self.state = .closed
                actions.append(.close)
                if self.hasResults { actions.append(.giveBack) }
                return actions
            }
        } else if cancelled || now - self.lastActivity >= self.configuration.pingInterval {
            self.pingSentAt = now
            actions.append(.sendPing)
        }
        if cancelled {
            actions.append(.giveBack)
            self.closeIfDrained(&actions)
            actions.append(.writeRequests)
        }
        // A draining connection whose last streams the deadline cut closes now: no PING for it.
        if self.state == .closed, self.pingSentAt == now {
            self.pingSentAt = nil
            actions.remove(.sendPing)
        }
        return actions
    }

    /// The connection failed (a protocol or TLS error): close it, and its rows in flight go back to the queue now
    /// rather than when the close completes.
    mutating func failed(_ message: String, now: NIODeadline) -> Actions {
        var actions = Actions(.note(message))
        guard self.state != .closed else { return actions }
        self.abandonStreams(now: now)
        self.state = .closed
        if self.hasResults { actions.append(.giveBack) }
        actions.append(.close)
        return actions
    }

    /// No row is left for any connection of the job (the source is read to its end, none is ready, none waits to
    /// be sent again): a connection without a stream in flight closes now, rather than idle until the job's last
    /// answer and then close with the others; one with streams in flight is asked again after their answers (an
    /// answer may give a row back, and then rows are left). A connection closed so is `finished`: its slot does not
    /// replace it.
    mutating func noRowsLeft(now: NIODeadline) -> Actions {
        var actions = Actions()
        guard self.state != .closed, self.streams.isEmpty else { return actions }
        self.state = .closed
        self.finished = true
        actions.append(.close)
        return actions
    }

    /// The connection closed (for any reason): the rows still in flight may or may not have been delivered.
    mutating func closed(now: NIODeadline) -> Actions {
        self.abandonStreams(now: now)
        self.state = .closed
        return self.hasResults ? Actions(.giveBack) : Actions()
    }

    /// The rows settled or given back since the last call, for the job; nil when there are none.
    mutating func takeResults() -> Results? {
        guard self.hasResults else { return nil }
        let cuts = self.flight.takeCuts()
        let results = Results(
            outcomes: self.outcomes.take(),
            deliveries: self.deliveries,
            finals: self.finals,
            retries: self.retries,
            flightCuts: cuts.cuts,
            smallestFlightWindow: cuts.smallest,
            streamLimit: self.streamLimit,
            roundTrip: self.roundTrip,
            answerSample: self.answerSample,
            progressUntil: self.progressUntil
        )
        self.progressUntil = nil
        self.roundTrip = nil
        self.answerSample = nil
        self.deliveries = []
        self.finals = 0
        self.retries = []
        return results
    }

    // Progress rides with the outcomes: every answer settles its row, sends it again, or renews the token and then
    // does either.
    private var hasResults: Bool { self.finals > 0 || !self.retries.isEmpty }

    // MARK: Outcomes

    private mutating func finish(_ stream: Stream, streamID: Int32, now: NIODeadline) -> Actions {
        self.dropFinishedDeadlines()
        self.answers += 1
        self.progressUntil = max(self.progressUntil ?? now, now)
        // Any answer other than a 403 means the credentials passed.
        if stream.status != 403 { self.authenticated = true }
        let roundTrip = now - stream.sentAt
        if roundTrip < (self.roundTrip ?? .nanoseconds(Int64.max)) { self.roundTrip = roundTrip }
        self.answerSample = roundTrip
        let outcome = HTTP2Outcome(
            status: stream.status ?? 0,
            apnsID: stream.apnsID,
            body: stream.body.map { Array($0.readableBytesView) } ?? [],
            retryAfter: stream.retryAfter
        )
        let item = stream.item
        var actions = Actions()
        switch outcome {
        case .delivered(let apnsID):
            let ceiling = self.streamCeiling
            self.flight.accepted(ceiling: ceiling)
            self.outcomes.confirm(item.row)
            if self.configuration.recordDeliveries {
                self.deliveries.append(
                    HTTP2Delivery(
                        line: item.row.line,
                        token: item.row.token,
                        apnsID: apnsID,
                        apnsUniqueID: stream.apnsUniqueID,
                        afterLoss: item.losses > 0
                    )
                )
            }
            self.finals += 1
        case .rejected(let status, let reason):
            self.reject(item, status: status, reason: reason)
        case .unregistered(let timestamp, let reason):
            self.reject(item, status: 410, reason: reason, unregistered: true, since: timestamp)
        case .retry(let status, let reason, let retryAfter):
            if status == 429 { self.tooManyRequests(streamID: streamID, retryAfter: retryAfter, now: now) }
            self.retryLater(item, status: status, reason: reason, retryAfter: retryAfter, now: now)
        case .expiredProviderToken:
            if let bearer = stream.bearer {
                actions.append(.renewToken(TokenRenewal(item: item, bearer: bearer)))
            } else {
                self.refusedForToken(item)
                actions.append(.stopJob(Self.stop(for: .expiredProviderToken, status: 403)))
            }
        case .providerTokenRefused(let status, let reason):
            self.refusedForToken(item)
            actions.append(.stopJob(Self.stop(for: reason, status: status)))
        case .stopJob(let status, let reason):
            self.reject(item, status: status, reason: reason)
            actions.append(.stopJob(Self.stop(for: reason, status: status)))
        }
        self.closeIfDrained(&actions)
        return actions
    }

    /// A row whose provider token was refused: the device never saw it, so it is not rejected but left unsent,
    /// listed as unsettled (the job stops with it; sending the unsettled rows again sends it).
    /// A row that goes no further in this job: unsent when none of its sends can have reached the device (a
    /// refusal, a 429/500/503, a token refused), so a later run sends it as new; unanswered (written, and it may
    /// have arrived) when an earlier send was lost with its stream or connection.
    private mutating func leaveUnsettled(_ item: HTTP2WorkItem) {
        self.outcomes.leave(item.row, item.losses > 0 ? .unanswered : .unsent)
    }

    private mutating func refusedForToken(_ item: HTTP2WorkItem) {
        self.leaveUnsettled(item)
        self.finals += 1
    }

    private mutating func reject(
        _ item: HTTP2WorkItem,
        status: Int,
        reason: APNSReason,
        unregistered: Bool = false,
        since: Int64? = nil
    ) {
        self.outcomes.reject(
            item.row,
            status: status,
            reason: reason.rawValue,
            unregistered: unregistered,
            unregisteredSince: since
        )
        self.finals += 1
    }

    /// Sends the row again after its backoff (full jitter from this connection's generator, never sooner than
    /// `Retry-After`). Once it has had its attempts it is left unsent and listed as unsettled, never rejected: a
    /// 429, 500 or 503 says the service could not take it now, not that the token is bad, so a later run (or the
    /// unsettled file sent again) may still deliver it.
    private mutating func retryLater(
        _ item: HTTP2WorkItem,
        status: Int,
        reason: APNSReason,
        retryAfter: Int64? = nil,
        backoff: Bool = true,
        now: NIODeadline
    ) {
        var item = item
        item.attempts += 1
        item.unanswered = false
        let retry = self.configuration.retry
        guard retry.allowsRetry(after: item.attempts) else {
            self.leaveUnsettled(item)
            self.finals += 1
            return
        }
        let delay =
            backoff ? retry.delay(attempts: item.attempts, retryAfter: retryAfter, random: self.random.nextUnit()) : 0
        item.notBefore = now + .nanoseconds(Int64(clamping: delay))
        // The server asked for the wait (`Retry-After`, a 429 or 503): the job is not stalled while it lasts.
        if retryAfter != nil { self.progressUntil = max(self.progressUntil ?? item.notBefore, item.notBefore) }
        self.outcomes.resend()
        self.retries.append(item)
    }

    /// A refused stream: the server did not process it, so it goes again after a backoff (by its refusals) without
    /// using an attempt; a row refused `maximumRefusals` times is left unsent (listed as unsettled: never processed,
    /// so a later run may send it), so a server that refuses everything cannot keep a job going forever.
    private mutating func refused(_ item: HTTP2WorkItem, now: NIODeadline) {
        var item = item
        item.refusals += 1
        guard item.refusals < self.configuration.maximumRefusals else {
            self.leaveUnsettled(item)
            self.finals += 1
            return
        }
        let delay = self.configuration.retry.delay(
            attempts: min(item.refusals, 16),
            retryAfter: nil,
            random: self.random.nextUnit()
        )
        item.notBefore = now + .nanoseconds(Int64(clamping: delay))
        self.outcomes.resend()
        self.retries.append(item)
    }

    /// A 429: halves the flight (what was in flight, under the current limit) unless this stream was written
    /// before the last cut, and holds new requests until `Retry-After` has passed.
    private mutating func tooManyRequests(streamID: Int32, retryAfter: Int64?, now: NIODeadline) {
        if let retryAfter, retryAfter > 0 {
            let cap = self.configuration.retry.maximumRetryAfter
            let wait = min(Duration.seconds(retryAfter), cap)
            let until = now + TimeAmount(wait)
            self.holdUntil = max(self.holdUntil ?? until, until)
        }
        // The flight this answer belonged to: the streams still in flight and this one.
        let flight = min(self.streamLimit, self.streams.count + 1)
        self.flight.tooManyRequests(streamID: Int(streamID), flight: flight, nextStreamID: self.nextStreamID)
    }

    /// The most streams the flight window may grow to: the server's limit and our cap.
    private var streamCeiling: Int {
        guard case .open(let remote) = self.state else { return self.configuration.maximumStreams }
        return min(self.configuration.maximumStreams, remote)
    }

    /// A row whose fate is unknown: sent again at once or left uncertain, as the policy says.
    private mutating func uncertain(_ item: HTTP2WorkItem, now: NIODeadline) {
        var item = item
        item.losses += 1
        item.unanswered = true
        if self.outcomes.uncertain(
            CollectionOfOne(item.row),
            mayRetry: item.losses < self.configuration.maximumLosses
        ) {
            item.notBefore = now
            self.retries.append(item)
        } else {
            self.finals += 1
        }
    }

    private mutating func abandonStreams(now: NIODeadline) {
        // In send order, so that the rows go back in the order they were taken.
        for entry in self.deadlines {
            if let stream = self.streams.removeValue(forKey: entry.id) { self.uncertain(stream.item, now: now) }
        }
        self.deadlines.removeAll()
        for stream in self.streams.values { self.uncertain(stream.item, now: now) }
        self.streams.removeAll()
        self.pingSentAt = nil
    }

    private mutating func retire(lastStreamID: Int32, _ actions: inout Actions) {
        switch self.state {
        case .connecting, .open:
            self.state = .draining(lastStreamID: lastStreamID)
            actions.append(.retire)
        case .draining(let last):
            self.state = .draining(lastStreamID: min(last, lastStreamID))
        case .closed:
            break
        }
    }

    private mutating func closeIfDrained(_ actions: inout Actions) {
        guard case .draining = self.state, self.streams.isEmpty else { return }
        self.state = .closed
        actions.append(.close)
    }

    private mutating func dropFinishedDeadlines() {
        while let first = self.deadlines.first, self.streams[first.id] == nil { self.deadlines.removeFirst() }
    }
}
