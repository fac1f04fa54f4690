import CoreMetrics

/// A webhook's metrics, through swift-metrics as the service's others, by the endpoint's label: events pending,
/// delivered, attempts failed, events given up on.
struct WebhookMetrics: Sendable {
    let pending: Gauge
    let delivered: Counter
    let failedAttempts: Counter
    let dead: Counter

    init(label: String) {
        let dimensions = [("webhook", label)]
        self.pending = Gauge(label: "salvo_webhook_events_pending", dimensions: dimensions)
        self.delivered = Counter(label: "salvo_webhook_events_delivered_total", dimensions: dimensions)
        self.failedAttempts = Counter(label: "salvo_webhook_failed_attempts_total", dimensions: dimensions)
        self.dead = Counter(label: "salvo_webhook_events_dead_total", dimensions: dimensions)
    }
}
