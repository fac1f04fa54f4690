import CoreMetrics
import NIOConcurrencyHelpers

/// A job's counts as swift-metrics, fed from progress snapshots (`update`, twice a second and once at the end),
/// so the hot paths pay nothing: counters advance by what changed since the last snapshot.
///
/// Counters: `salvo_notifications_written_total` (resends included), `salvo_rows_delivered_total` (confirmed or
/// presumed), `salvo_rows_confirmed_total`, `salvo_rows_rejected_total{reason}`, `salvo_rows_expired_total`,
/// `salvo_rows_uncertain_total` (left uncertain), `salvo_rows_resent_total`, `salvo_reconnects_total`,
/// `salvo_bytes_written_total`; gauges: `salvo_rows_presumed` (presumed and not proven yet: a later answer turns
/// them into confirmed ones, so it can fall), `salvo_rows_in_flight`, `salvo_connections`, `salvo_rows_valid`;
/// timer: `salvo_http2_answer_seconds` (`recordAnswer`, sampled by the HTTP/2 client once per batch of answers).
/// After the final `update` the counters equal the job's report. Thread-safe: `update` takes one lock.
public final class JobMetrics: Sendable {
    private let factory: any MetricsFactory
    private let dimensions: [(String, String)]
    private let written: Counter
    private let delivered: Counter
    private let confirmed: Counter
    private let presumed: Gauge
    private let expired: Counter
    private let uncertain: Counter
    private let resent: Counter
    private let reconnects: Counter
    private let bytes: Counter
    private let inFlight: Gauge
    private let connections: Gauge
    private let validRows: Gauge
    private let answers: Timer
    private let state: NIOLockedValueBox<State>

    private struct State {
        var last = JobReport()
        var rejected: [String: Counter] = [:]
    }

    /// - Parameters:
    ///   - factory: where the metrics go (a Prometheus registry's factory, say); the process's bootstrapped
    ///     factory by default.
    ///   - dimensions: added to every metric (the protocol, a partition).
    public init(factory: any MetricsFactory = MetricsSystem.factory, dimensions: [(String, String)] = []) {
        self.factory = factory
        self.dimensions = dimensions
        func counter(_ name: String) -> Counter { Counter(label: name, dimensions: dimensions, factory: factory) }
        self.written = counter("salvo_notifications_written_total")
        self.delivered = counter("salvo_rows_delivered_total")
        self.confirmed = counter("salvo_rows_confirmed_total")
        self.presumed = Gauge(label: "salvo_rows_presumed", dimensions: dimensions, factory: factory)
        self.expired = counter("salvo_rows_expired_total")
        self.uncertain = counter("salvo_rows_uncertain_total")
        self.resent = counter("salvo_rows_resent_total")
        self.reconnects = counter("salvo_reconnects_total")
        self.bytes = counter("salvo_bytes_written_total")
        self.inFlight = Gauge(label: "salvo_rows_in_flight", dimensions: dimensions, factory: factory)
        self.connections = Gauge(label: "salvo_connections", dimensions: dimensions, factory: factory)
        self.validRows = Gauge(label: "salvo_rows_valid", dimensions: dimensions, factory: factory)
        self.answers = Timer(label: "salvo_http2_answer_seconds", dimensions: dimensions, factory: factory)
        self.state = NIOLockedValueBox(State())
    }

    /// Advances the counters to `progress`'s counts and sets the gauges.
    public func update(_ progress: JobProgress) {
        self.inFlight.record(progress.inFlight)
        self.connections.record(progress.connections)
        self.validRows.record(progress.validRows)
        let now = progress.report
        self.presumed.record(now.presumed)
        self.state.withLockedValue { state in
            let last = state.last
            func advance(_ counter: Counter, _ new: Int, _ old: Int) {
                if new > old { counter.increment(by: new - old) }
            }
            advance(self.written, now.written, last.written)
            advance(self.delivered, now.delivered, last.delivered)
            advance(self.confirmed, now.confirmed, last.confirmed)
            advance(self.expired, now.expired, last.expired)
            advance(self.uncertain, now.uncertain, last.uncertain)
            advance(self.resent, now.resent, last.resent)
            advance(self.reconnects, now.reconnects, last.reconnects)
            advance(self.bytes, now.bytesWritten, last.bytesWritten)
            for (reason, count) in now.rejected {
                let counter =
                    state.rejected[reason]
                    ?? Counter(
                        label: "salvo_rows_rejected_total",
                        dimensions: self.dimensions + [("reason", reason)],
                        factory: self.factory
                    )
                state.rejected[reason] = counter
                advance(counter, count, last.rejected[reason] ?? 0)
            }
            // Counters only grow: a snapshot that is behind (a later job's first) changes nothing.
            state.last = Self.maximum(last, now)
        }
    }

    /// One HTTP/2 answer's time from request to answer.
    public func recordAnswer(nanoseconds: Int64) {
        self.answers.recordNanoseconds(nanoseconds)
    }

    private static func maximum(_ a: JobReport, _ b: JobReport) -> JobReport {
        var m = b
        m.written = max(a.written, b.written)
        m.confirmed = max(a.confirmed, b.confirmed)
        // `delivered` is confirmed + presumed: keep the larger total in `presumed`'s place.
        m.presumed = max(a.delivered, b.delivered) - m.confirmed
        m.expired = max(a.expired, b.expired)
        m.uncertain = max(a.uncertain, b.uncertain)
        m.resent = max(a.resent, b.resent)
        m.reconnects = max(a.reconnects, b.reconnects)
        m.bytesWritten = max(a.bytesWritten, b.bytesWritten)
        for (reason, count) in a.rejected { m.rejected[reason] = max(count, b.rejected[reason] ?? 0) }
        return m
    }
}
