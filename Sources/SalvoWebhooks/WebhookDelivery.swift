import APNSWire
import AsyncHTTPClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import SalvoRows
import SalvoService

/// One webhook's delivery loop: takes its oldest pending events from the outbox as `WebhookBatching` decides, posts
/// them signed, marks them delivered on a 2xx, and after anything else (another status, a refused connection, a
/// timeout) waits as `WebhookRetry` decides, giving up on the events older than its bound. Every wait is bounded and
/// kept by a timer on an event loop; `wake()` (new events) or `stop()` ends it early.
final class WebhookDelivery: Sendable {
    let endpoint: WebhookEndpoint
    private let outbox: any WebhookOutbox
    private let secret: WebhookSecret
    private let configuration: WebhookConfiguration
    private let client: HTTPClient
    private let logger: Logger
    private let metrics: WebhookMetrics
    private let loop: any EventLoop
    private let state = NIOLockedValueBox(State())

    private struct State {
        /// Woken while not waiting: the next wait returns at once.
        var woken = false
        var stopping = false
        var waiter: CheckedContinuation<Void, Never>?
        var timer: Scheduled<Void>?
        var failures = 0
        var failedAttempts = 0
        var delivered = 0
        var lastError: String?
        var nextAttemptAt: Int64?
    }

    init(
        endpoint: WebhookEndpoint,
        outbox: any WebhookOutbox,
        secret: WebhookSecret,
        configuration: WebhookConfiguration,
        client: HTTPClient,
        loop: any EventLoop,
        logger: Logger
    ) {
        self.endpoint = endpoint
        self.outbox = outbox
        self.secret = secret
        self.configuration = configuration
        self.client = client
        self.loop = loop
        self.logger = logger
        self.metrics = WebhookMetrics(label: endpoint.label)
    }

    /// What the loop knows of its endpoint now.
    struct Snapshot: Sendable {
        var failures: Int
        var failedAttempts: Int
        var delivered: Int
        var lastError: String?
        var nextAttemptAt: Int64?
    }

    var snapshot: Snapshot {
        self.state.withLockedValue {
            Snapshot(
                failures: $0.failures,
                failedAttempts: $0.failedAttempts,
                delivered: $0.delivered,
                lastError: $0.lastError,
                nextAttemptAt: $0.nextAttemptAt
            )
        }
    }

    /// New events may be pending.
    func wake() {
        let waiter = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.woken = true
                return nil
            }
            state.waiter = nil
            state.timer?.cancel()
            state.timer = nil
            return waiter
        }
        waiter?.resume()
    }

    func stop() {
        self.state.withLockedValue { $0.stopping = true }
        self.wake()
    }

    private var isStopping: Bool { self.state.withLockedValue { $0.stopping } }

    /// Until `deadline` (milliseconds since 1970), a wake or a stop.
    private func wait(until deadline: Int64) async {
        let delay = max(1, deadline - self.configuration.now())
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = self.state.withLockedValue { state -> Bool in
                if state.woken || state.stopping {
                    state.woken = false
                    return true
                }
                state.waiter = continuation
                state.timer = self.loop.scheduleTask(in: .milliseconds(delay)) { [weak self] in self?.timeUp() }
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func timeUp() {
        let waiter = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            defer {
                state.waiter = nil
                state.timer = nil
            }
            return state.waiter
        }
        waiter?.resume()
    }

    func run() async {
        var retry = WebhookRetry(policy: self.configuration.retry)
        let batching = self.configuration.batching
        var pruneAt = self.configuration.now()
        while !self.isStopping {
            let now = self.configuration.now()
            if now >= pruneAt {
                pruneAt = now + self.configuration.pruneEvery
                await self.prune(now: now)
            }
            if !retry.mayAttempt(now: now), let next = retry.nextAttemptAt {
                await self.wait(until: next)
                continue
            }
            let pending: [OutboxEntry]
            do {
                pending = try await self.outbox.pendingEvents(
                    endpoint: self.endpoint.url,
                    limit: batching.maximumEvents
                )
            } catch {
                self.logger.error(
                    "the webhook's events cannot be read",
                    metadata: ["webhook": "\(self.endpoint.label)", "cause": "\(error.message)"]
                )
                await self.wait(until: now + 1000)
                continue
            }
            let oldest = pending.map(\.createdAt).min()
            switch batching.decide(pending: pending.count, oldestCreatedAt: oldest, now: now) {
            case .idle:
                self.metrics.pending.record(0)
                await self.wait(until: now + self.configuration.idleCheck)
            case .wait(let until):
                await self.wait(until: until)
            case .send:
                await self.deliver(pending, retry: &retry)
                if let count = try? await self.outbox.pendingCount(endpoint: self.endpoint.url) {
                    self.metrics.pending.record(count)
                }
            }
        }
    }

    /// Removes this endpoint's delivered and dead events older than the retention; a failure is logged and left to
    /// the next time.
    private func prune(now: Int64) async {
        do {
            let removed = try await self.outbox.prune(
                endpoint: self.endpoint.url,
                endedBefore: now - self.configuration.retention
            )
            if removed > 0 {
                self.logger.info(
                    "the webhook's old events were removed from the outbox",
                    metadata: ["webhook": "\(self.endpoint.label)", "removed": "\(removed)"]
                )
            }
        } catch {
            self.logger.warning(
                "the webhook's old events cannot be removed",
                metadata: ["webhook": "\(self.endpoint.label)", "cause": "\(error.message)"]
            )
        }
    }

    /// One attempt with `events`.
    private func deliver(_ events: [OutboxEntry], retry: inout WebhookRetry) async {
        let body = Self.body(events)
        let sentAt = self.configuration.now()
        var request = HTTPClientRequest(url: self.endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "salvo-webhooks/1")
        request.headers.add(
            name: WebhookSignature.header,
            value: WebhookSignature.value(secret: self.secret, timestamp: sentAt / 1000, body: body)
        )
        request.headers.add(name: "Salvo-Event-Ids", value: events.map(\.id).joined(separator: ","))
        request.body = .bytes(ByteBuffer(bytes: body))
        let failure: String?
        do {
            let response = try await self.client.execute(
                request,
                timeout: .milliseconds(self.configuration.requestTimeout)
            )
            // The answer's body is read (and dropped) so that the connection can be used again; bounded.
            _ = try? await response.body.collect(upTo: 1 << 20)
            failure = (200..<300).contains(response.status.code) ? nil : "HTTP \(response.status.code)"
        } catch {
            failure = "\(error)"
        }
        let now = self.configuration.now()
        let ids = events.map(\.id)
        if let failure {
            let next = retry.failed(now: now, jitter: self.configuration.jitter)
            let dead = events.filter { retry.isDead(createdAt: $0.createdAt, now: now) }.map(\.id)
            self.state.withLockedValue { state in
                state.failures = retry.failures
                state.failedAttempts += 1
                state.lastError = failure
                state.nextAttemptAt = next
            }
            self.metrics.failedAttempts.increment()
            if !dead.isEmpty { self.metrics.dead.increment(by: dead.count) }
            self.logger.warning(
                "a webhook delivery failed",
                metadata: [
                    "webhook": "\(self.endpoint.label)", "events": "\(events.count)", "cause": "\(failure)",
                    "failures": "\(retry.failures)", "retry_in_ms": "\(next - now)", "dead": "\(dead.count)",
                ]
            )
            do {
                try await self.outbox.failed(endpoint: self.endpoint.url, ids: ids, dead: dead, now: now)
            } catch {
                self.logger.error("a failed webhook delivery cannot be recorded", metadata: ["cause": "\(error)"])
            }
        } else {
            retry.succeeded()
            do {
                try await self.outbox.acknowledge(endpoint: self.endpoint.url, ids: ids, now: now)
            } catch {
                // They go again: the receiver drops them by their ids.
                self.logger.error("a webhook delivery cannot be recorded", metadata: ["cause": "\(error)"])
            }
            self.state.withLockedValue { state in
                state.failures = 0
                state.delivered += events.count
                state.lastError = nil
                state.nextAttemptAt = nil
            }
            self.metrics.delivered.increment(by: events.count)
        }
    }

    /// `{"events":[{"id","type","created_at","data"}]}`, each event's data as stored.
    static func body(_ events: [OutboxEntry]) -> [UInt8] {
        var out = Array(#"{"events":["#.utf8)
        for (index, event) in events.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += Array(#"{"id":"#.utf8)
            out += JSONValue.string(event.id).compactBytes
            out += Array(#","type":"#.utf8)
            out += JSONValue.string(event.type).compactBytes
            out += Array(#","created_at":"#.utf8)
            out += JSONValue.string(Self.time(event.createdAt)).compactBytes
            out += Array(#","data":"#.utf8)
            out += event.data.isEmpty ? Array("{}".utf8) : event.data
            out.append(UInt8(ascii: "}"))
        }
        out += Array("]}".utf8)
        return out
    }

    /// RFC 3339 in UTC with milliseconds, as the API's times.
    static func time(_ milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = String(milliseconds - seconds * 1000)
        let text = UnixTime.iso8601(seconds)
        return String(text.dropLast()) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }
}
