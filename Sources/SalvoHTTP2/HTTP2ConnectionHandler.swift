import APNSWire
import DequeModule
import NIOCore
import NIOHPACK
import NIOHTTP2
import SalvoEngine

/// One HTTP/2 connection's requests: takes rows from the job's work queue while the connection has free streams,
/// writes each as HEADERS + DATA on a new stream (many writes, one flush per batch), maps each response to an
/// outcome, and gives the results back to the job once per read batch.
///
/// Sits behind `NIOHTTP2Handler` (frame level, no stream channels: a stream is a dictionary entry, not a child
/// channel). Streams in flight are bounded by the server's `SETTINGS_MAX_CONCURRENT_STREAMS` as it changes, by
/// the job's own cap, and by 1 until the service has accepted the credentials. Every stream has a
/// deadline. A connection that has been silent for the ping interval (idle or not), or whose request missed its
/// deadline, is checked with PING and takes no new rows until the answer comes; without an answer in time it
/// closes, and the rows in flight on it go back to the queue (uncertain: they may have been delivered). After
/// GOAWAY, streams above the last stream id (never processed) go back to the queue at once, the rest finish, and
/// the connection closes.
///
/// Confined to its channel's event loop; not `Sendable`.
final class HTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var item: HTTP2WorkItem
        var bearer: ProviderToken.Bearer?
        var status: Int?
        var apnsID: String?
        var retryAfter: Int64?
        var body: ByteBuffer?
    }

    /// Called on the event loop when the server sends GOAWAY (the pool opens a replacement).
    var onGoAway: (() -> Void)?
    /// Called on the event loop when the server's first SETTINGS arrive: TLS and HTTP/2 are up.
    var onReady: (() -> Void)?
    /// Whether the server's SETTINGS have arrived on this connection.
    var isReady: Bool { self.remoteMaximumStreams != nil }

    private let job: HTTP2JobContext
    private var streams: [Int32: Stream] = [:]
    /// Stream ids in send order with their deadlines; entries of finished streams are dropped from the front.
    private var deadlines = Deque<(id: Int32, deadline: NIODeadline)>()
    /// The id of the next stream; past `Int32.max` when the connection has used up its ids (kept in an `Int` so
    /// that it can step past the end without overflow).
    private var nextStreamID: Int
    private var remoteMaximumStreams: Int?
    private var authenticated: Bool
    private var goAwayLastStreamID: Int32?
    private var closing = false
    private var pending = HTTP2JobResult()
    private var pendingFinals = 0
    private var pendingRetries: [HTTP2WorkItem] = []
    private var timer: Scheduled<Void>?
    private var wakeUp: Scheduled<Void>?
    private var lastActivity = NIODeadline.now()
    private var pingSentAt: NIODeadline?
    private var context: ChannelHandlerContext?
    private let batchLimit = 512
    /// Inbound connection window target; WINDOW_UPDATE tops it up when half is used.
    private let windowTarget = 1 << 20

    /// - Parameter firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    init(job: HTTP2JobContext, firstStreamID: Int32 = 1) {
        self.job = job
        self.nextStreamID = Int(firstStreamID)
        // One stream until the service has accepted the credentials: a token is only checked by the first
        // response, and a certificate for the wrong environment or topic too. One round trip per connection buys
        // a job that stops after one refused request rather than a thousand.
        self.authenticated = false
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.scheduleTick()
        // The first WINDOW_UPDATE raises the connection window from 64 KiB, so error bodies never stall.
        let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: self.windowTarget))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.wakeUp?.cancel()
        self.wakeUp = nil
        self.closing = true
        self.abandonStreams()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        self.lastActivity = .now()
        let id = Int32(Int(frame.streamID))
        switch frame.payload {
        case .headers(let headers):
            self.received(headers: headers.headers, endStream: headers.endStream, on: id)
        case .data(let data):
            self.received(data: data, on: id)
        case .rstStream(let code):
            if let stream = self.streams.removeValue(forKey: id) { self.lost(stream.item, id: id, code: code) }
        case .settings(.settings(let settings)):
            self.received(settings: settings)
        case .goAway(let lastStreamID, _, let opaqueData):
            self.received(goAwayWithLastStreamID: Int32(Int(lastStreamID)), opaqueData: opaqueData)
        case .ping(_, ack: true):
            self.pingSentAt = nil
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.giveBack()
        self.pump()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.pump() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // NIOHTTP2 raises a few events per stream (created, window updated, closed); ours is the last handler,
        // so the per-stream ones stop here rather than walk on to the pipeline's tail.
        switch event {
        case let closed as StreamClosedEvent:
            // A stream the protocol layer closed before its answer reached us (a stream error, or the streams
            // a GOAWAY cut off).
            let id = Int32(Int(closed.streamID))
            if let stream = self.streams.removeValue(forKey: id) {
                self.lost(stream.item, id: id, code: closed.reason ?? .cancel)
                self.giveBack()
            }
        case let window as NIOHTTP2WindowUpdatedEvent:
            if window.streamID == .rootStream, let size = window.inboundWindowSize, size < self.windowTarget / 2 {
                let frame = HTTP2Frame(
                    streamID: .rootStream,
                    payload: .windowUpdate(windowSizeIncrement: self.windowTarget - size)
                )
                context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
            }
        case is NIOHTTP2StreamCreatedEvent:
            break
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Stream errors only end their stream (the StreamClosedEvent settles it); anything else ends the
        // connection.
        if error is NIOHTTP2Errors.StreamError { return }
        self.job.noteConnectionError("\(error)")
        context.close(promise: nil)
    }

    // MARK: Sending

    /// Sends as many rows as the connection may carry now, then flushes once.
    private func pump() {
        // While a PING is unanswered the connection may be dead: rows wait for the answer (or for another
        // connection) rather than join those that may already be lost.
        guard let context = self.context, !self.closing, self.goAwayLastStreamID == nil, self.pingSentAt == nil,
            let remote = self.remoteMaximumStreams, context.channel.isWritable
        else { return }
        let limit = self.authenticated ? min(remote, self.job.maximumStreams) : 1
        // A client's stream ids are odd and at most 2^31 − 1, never reused: the last ones bound a batch.
        let idsLeft = max(0, (Int(Int32.max) - self.nextStreamID) / 2 + 1)
        let free = min(limit - self.streams.count, self.batchLimit, idsLeft)
        guard free > 0 else { return }
        let now = NIODeadline.now()
        let items = self.job.work.take(maximum: free, now: now)
        guard !items.isEmpty else {
            self.scheduleWakeUp(now: now)
            return
        }
        let bearer = self.job.token?.current()
        let deadline = now + self.job.requestTimeout
        for item in items {
            let id = Int32(self.nextStreamID)
            self.nextStreamID += 2
            let streamID = HTTP2StreamID(id)
            let headers = self.job.template.headers(token: item.row.token, authorization: bearer?.authorization)
            context.write(
                self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                promise: nil
            )
            context.write(
                self.wrapOutboundOut(
                    HTTP2Frame(
                        streamID: streamID,
                        payload: .data(.init(data: .byteBuffer(self.job.template.payload), endStream: true))
                    )
                ),
                promise: nil
            )
            self.streams[id] = Stream(item: item, bearer: bearer)
            self.deadlines.append((id, deadline))
        }
        context.flush()
        // Out of stream ids: retired like a connection that got GOAWAY. Its streams finish, it closes, and the
        // replacement opens now.
        if self.nextStreamID > Int(Int32.max) { self.retire() }
    }

    /// When no row may be sent now but the job is not done: look again when a delayed row is due, or soon (other
    /// connections may give rows back).
    private func scheduleWakeUp(now: NIODeadline) {
        guard self.wakeUp == nil, let context = self.context, !self.job.work.isDone else { return }
        var at = now + .milliseconds(20)
        if let due = self.job.work.nextDelayed { at = max(now + .milliseconds(1), min(at, due)) }
        self.wakeUp = context.eventLoop.assumeIsolated().scheduleTask(deadline: at) {
            self.wakeUp = nil
            self.pump()
        }
    }

    /// Stops taking rows; closes once the streams in flight have their answers.
    private func retire() {
        if self.goAwayLastStreamID == nil { self.goAwayLastStreamID = Int32(self.nextStreamID - 2) }
        self.onGoAway?()
        self.onGoAway = nil
        self.closeIfDrained()
    }

    private func closeIfDrained() {
        guard self.goAwayLastStreamID != nil, self.streams.isEmpty, !self.closing, let context = self.context else {
            return
        }
        self.closing = true
        context.close(promise: nil)
    }

    // MARK: Receiving

    private func received(headers: HPACKHeaders, endStream: Bool, on id: Int32) {
        guard var stream = self.streams[id] else { return }
        if stream.status == nil {
            guard let status = headers.first(name: ":status").flatMap({ Int($0) }), status >= 200 else {
                return  // an informational (1xx) header block
            }
            stream.status = status
            stream.apnsID = headers.first(name: "apns-id")
            stream.retryAfter = headers.first(name: "retry-after").flatMap { Int64($0) }
        }
        if endStream {
            self.streams[id] = nil
            self.finish(stream)
        } else {
            self.streams[id] = stream
        }
    }

    private func received(data: HTTP2Frame.FramePayload.Data, on id: Int32) {
        guard var stream = self.streams[id] else { return }
        if case .byteBuffer(var bytes) = data.data {
            // Error bodies are tiny; a larger one is cut rather than held.
            let room = 4096 - (stream.body?.readableBytes ?? 0)
            if room > 0, let slice = bytes.readSlice(length: min(room, bytes.readableBytes)) {
                if stream.body == nil {
                    stream.body = slice
                } else {
                    var body = stream.body!
                    stream.body = nil
                    body.writeImmutableBuffer(slice)
                    stream.body = body
                }
            }
        }
        if data.endStream {
            self.streams[id] = nil
            self.finish(stream)
        } else {
            self.streams[id] = stream
        }
    }

    private func received(settings: HTTP2Settings) {
        var maximum = self.remoteMaximumStreams ?? Int.max
        for setting in settings where setting.parameter == .maxConcurrentStreams {
            maximum = setting.value
        }
        let first = self.remoteMaximumStreams == nil
        self.remoteMaximumStreams = maximum
        if first {
            self.onReady?()
            self.onReady = nil
        }
    }

    private func received(goAwayWithLastStreamID lastStreamID: Int32, opaqueData: ByteBuffer?) {
        let previous = self.goAwayLastStreamID ?? Int32.max
        self.goAwayLastStreamID = min(previous, lastStreamID)
        // Streams above the last stream id were never processed: send them again on another connection, without
        // counting an attempt.
        for (id, stream) in self.streams where id > lastStreamID {
            self.streams[id] = nil
            self.pending.report.resent += 1
            self.pendingRetries.append(stream.item)
        }
        if let opaqueData, let body = APNSErrorBody(jsonBytes: Array(opaqueData.readableBytesView)),
            body.reason.stopsTheJob
        {
            self.job.work.stop(Self.stop(for: body.reason, status: body.reason.status ?? 403))
        }
        self.giveBack()
        self.retire()
    }

    // MARK: Outcomes

    private func finish(_ stream: Stream) {
        self.dropFinishedDeadlines()
        let body = stream.body.map { Array($0.readableBytesView) } ?? []
        let outcome = HTTP2Outcome(
            status: stream.status ?? 0,
            apnsID: stream.apnsID,
            body: body,
            retryAfter: stream.retryAfter
        )
        let item = stream.item
        // Any answer other than a 403 means the credentials passed.
        if stream.status != 403 { self.authenticated = true }
        switch outcome {
        case .delivered(let apnsID):
            self.pending.report.confirmed += 1
            if self.job.recordDeliveries {
                self.pending.deliveries.append(
                    HTTP2Delivery(line: item.row.line, token: item.row.token, apnsID: apnsID)
                )
            }
            self.pendingFinals += 1
        case .rejected(let status, let reason):
            self.reject(item, status: status, reason: reason)
        case .unregistered(let timestamp):
            self.pending.unregistered.append(
                UnregisteredToken(line: item.row.line, token: item.row.token.hexString, timestamp: timestamp)
            )
            self.reject(item, status: 410, reason: .unregistered)
        case .retry(let status, let reason, let retryAfter):
            self.retryLater(item, status: status, reason: reason, retryAfter: retryAfter)
        case .expiredProviderToken:
            guard let token = self.job.token, let bearer = stream.bearer else {
                self.reject(item, status: 403, reason: .expiredProviderToken)
                return
            }
            switch token.renew(after: bearer) {
            case .renewed:
                self.retryLater(item, status: 403, reason: .expiredProviderToken, retryAfter: nil, backoff: false)
            case .refused(let message):
                self.reject(item, status: 403, reason: .expiredProviderToken)
                self.job.work.stop(HTTP2JobStop(reason: APNSReason.expiredProviderToken.rawValue, message: message))
            }
        case .stopJob(let status, let reason):
            self.reject(item, status: status, reason: reason)
            self.job.work.stop(Self.stop(for: reason, status: status))
        }
        self.closeIfDrained()
    }

    private func reject(_ item: HTTP2WorkItem, status: Int, reason: APNSReason) {
        self.pending.report.rejected[reason.rawValue, default: 0] += 1
        self.pending.rejectedRows.append(
            RejectedRow(line: item.row.line, token: item.row.token.hexString, status: status, reason: reason.rawValue)
        )
        self.pendingFinals += 1
    }

    private func retryLater(
        _ item: HTTP2WorkItem,
        status: Int,
        reason: APNSReason,
        retryAfter: Int64?,
        backoff: Bool = true
    ) {
        var item = item
        item.attempts += 1
        guard self.job.retry.allowsRetry(after: item.attempts) else {
            self.reject(item, status: status, reason: reason)
            return
        }
        let delay =
            backoff
            ? self.job.retry.delay(attempts: item.attempts, retryAfter: retryAfter, random: Double.random(in: 0..<1))
            : 0
        item.notBefore = .now() + .nanoseconds(Int64(clamping: delay))
        self.pending.report.resent += 1
        self.pendingRetries.append(item)
    }

    /// A stream that ended without an answer: refused streams were not processed and are retried; otherwise the
    /// notification may or may not have been delivered.
    private func lost(_ item: HTTP2WorkItem, id: Int32, code: HTTP2ErrorCode) {
        self.dropFinishedDeadlines()
        if code == .refusedStream {
            self.retryLater(item, status: 0, reason: APNSReason(rawValue: "REFUSED_STREAM"), retryAfter: nil)
        } else if let last = self.goAwayLastStreamID, id > last {
            self.pending.report.resent += 1
            self.pendingRetries.append(item)
        } else {
            self.uncertain(item)
        }
        self.closeIfDrained()
    }

    private func uncertain(_ item: HTTP2WorkItem) {
        self.pending.report.uncertainEvents += 1
        var item = item
        item.attempts += 1
        if self.job.onUncertain == .resend && self.job.retry.allowsRetry(after: item.attempts) {
            item.notBefore = .now()
            self.pending.report.resent += 1
            self.pendingRetries.append(item)
        } else {
            self.pending.report.uncertain += 1
            self.pendingFinals += 1
        }
    }

    /// Settles the streams of a connection that is going away: without an answer, their rows may or may not have
    /// been delivered.
    private func abandonStreams() {
        let lost = self.streams.values.map(\.item)
        self.streams.removeAll()
        self.deadlines.removeAll()
        for item in lost { self.uncertain(item) }
        self.giveBack()
    }

    /// Hands this batch's results to the job: the results first, so the job never finishes without them.
    private func giveBack() {
        guard self.pendingFinals > 0 || !self.pendingRetries.isEmpty else { return }
        let results = self.pending
        self.job.results.withLockedValue { $0.merge(results) }
        self.job.work.complete(finals: self.pendingFinals, retries: self.pendingRetries)
        self.pending = HTTP2JobResult()
        self.pendingFinals = 0
        self.pendingRetries.removeAll(keepingCapacity: true)
    }

    private func dropFinishedDeadlines() {
        while let first = self.deadlines.first, self.streams[first.id] == nil { self.deadlines.removeFirst() }
    }

    // MARK: Timers

    /// Deadlines and health checks run on a tick of a tenth of the request timeout (5–100 ms): one timer per
    /// connection, not one per request.
    private func scheduleTick() {
        guard let context = self.context, !self.closing else { return }
        let tick = TimeAmount.milliseconds(min(100, max(5, self.job.requestTimeout.nanoseconds / 10_000_000)))
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: tick) {
            self.tick()
            self.scheduleTick()
        }
    }

    private func tick() {
        guard let context = self.context, !self.closing else { return }
        let now = NIODeadline.now()
        var cancelled = false
        while let first = self.deadlines.first, first.deadline <= now {
            self.deadlines.removeFirst()
            guard let stream = self.streams.removeValue(forKey: first.id) else { continue }
            let frame = HTTP2Frame(streamID: HTTP2StreamID(first.id), payload: .rstStream(.cancel))
            context.write(self.wrapOutboundOut(frame), promise: nil)
            self.uncertain(stream.item)
            cancelled = true
        }
        if let sent = self.pingSentAt {
            if now - sent > self.job.pingTimeout {
                // The rows in flight go back to the queue now: closing TLS may wait seconds for a peer that is
                // gone, and other connections can send them meanwhile.
                self.job.noteConnectionError("no PING answer within \(self.job.pingTimeout); closing the connection")
                self.closing = true
                self.abandonStreams()
                context.close(promise: nil)
                return
            }
        } else if cancelled || now - self.lastActivity >= self.job.pingInterval {
            // A request without an answer, or a connection that has said nothing for a while, idle or not: the
            // peer may be gone without a word (a NAT that dropped the flow, a server that hung). Streams in flight
            // cannot tell, since their deadlines are long and a late answer is not an error; a PING can.
            self.ping(now: now)
        }
        if cancelled {
            context.flush()
            self.giveBack()
            self.closeIfDrained()
            self.pump()
        }
    }

    private func ping(now: NIODeadline) {
        guard let context = self.context else { return }
        self.pingSentAt = now
        let frame = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
    }

    static func stop(for reason: APNSReason, status: Int) -> HTTP2JobStop {
        let advice: String
        switch reason {
        case .badCertificate, .badCertificateEnvironment:
            advice = "the client certificate is wrong for this server or environment (production vs sandbox)"
        case .invalidProviderToken, .missingProviderToken:
            advice = "the provider token is refused: check the key id, team id and the .p8 key"
        case .topicDisallowed:
            advice = "this topic may not be pushed with these credentials"
        default:
            advice = "the credentials are refused"
        }
        return HTTP2JobStop(
            reason: reason.rawValue,
            message: "APNs answered \(status) \(reason.rawValue): \(advice); the job stopped rather than retry"
        )
    }
}
