import CoreMetrics
import Dispatch
import NIOConcurrencyHelpers

/// The simulator's own counts as swift-metrics, sampled from its ledger once a second (never per notification):
/// `salvo_simulator_accepted_total`, `salvo_simulator_discarded_after_error_total`,
/// `salvo_simulator_error_responses_total{status}`, `salvo_simulator_resets_total`,
/// `salvo_simulator_connections_total`, `salvo_simulator_connections_refused_total{reason}`,
/// `salvo_simulator_refused_streams_total` (HTTP/2 streams opened above the announced limit); gauges
/// `salvo_simulator_ledger_tokens` and `salvo_simulator_ledger_bytes`.
///
/// `@unchecked Sendable`: the counts are behind `state`'s lock and the timer behind its own; Dispatch's timer type
/// is not marked Sendable, though starting and cancelling it are thread-safe.
public final class SimulatorMetrics: @unchecked Sendable {
    private let simulator: Simulator
    private let factory: any MetricsFactory
    private let accepted: Counter
    private let discarded: Counter
    private let resets: Counter
    private let connections: Counter
    private let refusedStreams: Counter
    private let tokens: Gauge
    private let bytes: Gauge
    private let state = NIOLockedValueBox(State())
    private let timer: NIOLockedValueBox<(any DispatchSourceTimer)?> = NIOLockedValueBox(nil)

    private struct State {
        var last = LedgerSnapshot()
        var errors: [String: Counter] = [:]
        var refused: [String: Counter] = [:]
    }

    public init(simulator: Simulator, factory: any MetricsFactory = MetricsSystem.factory) {
        self.simulator = simulator
        self.factory = factory
        self.accepted = Counter(label: "salvo_simulator_accepted_total", factory: factory)
        self.discarded = Counter(label: "salvo_simulator_discarded_after_error_total", factory: factory)
        self.resets = Counter(label: "salvo_simulator_resets_total", factory: factory)
        self.connections = Counter(label: "salvo_simulator_connections_total", factory: factory)
        self.refusedStreams = Counter(label: "salvo_simulator_refused_streams_total", factory: factory)
        self.tokens = Gauge(label: "salvo_simulator_ledger_tokens", factory: factory)
        self.bytes = Gauge(label: "salvo_simulator_ledger_bytes", factory: factory)
    }

    /// Samples now, then once a second until `stop()`.
    public func start(interval: DispatchTimeInterval = .seconds(1)) {
        self.update()
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "salvo.simulator.metrics"))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.update() }
        timer.resume()
        self.timer.withLockedValue { $0 = timer }
    }

    public func stop() {
        self.timer.withLockedValue {
            $0?.cancel()
            $0 = nil
        }
        self.update()
    }

    /// Advances the metrics to the ledger's counts now.
    public func update() {
        let now = self.simulator.ledger.snapshot()
        self.tokens.record(now.distinctTokens)
        self.bytes.record(now.tableBytes)
        self.state.withLockedValue { state in
            let last = state.last
            func advance(_ counter: Counter, _ new: Int, _ old: Int) {
                if new > old { counter.increment(by: new - old) }
            }
            advance(self.accepted, now.accepted, last.accepted)
            advance(self.discarded, now.discardedAfterError, last.discardedAfterError)
            advance(self.resets, now.resets, last.resets)
            advance(self.connections, now.connectionsAccepted, last.connectionsAccepted)
            advance(self.refusedStreams, now.refusedStreams, last.refusedStreams)
            self.advance(
                &state.errors,
                "salvo_simulator_error_responses_total",
                "status",
                now.errorResponses,
                last.errorResponses
            )
            self.advance(
                &state.refused,
                "salvo_simulator_connections_refused_total",
                "reason",
                now.connectionsRefused,
                last.connectionsRefused
            )
            state.last = now
        }
    }

    /// Advances one counter per key of `now` (labelled `dimension`), made when a key first appears.
    private func advance(
        _ counters: inout [String: Counter],
        _ label: String,
        _ dimension: String,
        _ now: [String: Int],
        _ last: [String: Int]
    ) {
        for (key, count) in now where count > last[key] ?? 0 {
            let counter = counters[key] ?? Counter(label: label, dimensions: [(dimension, key)], factory: self.factory)
            counters[key] = counter
            counter.increment(by: count - (last[key] ?? 0))
        }
    }
}
