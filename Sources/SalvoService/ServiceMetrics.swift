import CoreMetrics

/// The service's metrics, through swift-metrics (the command line bootstraps Prometheus): notifications accepted and
/// refused, outcomes by state and reason, the queue's depth, and the time from acceptance to the push service's
/// answer.
struct ServiceMetrics: Sendable {
    let accepted = Counter(label: "salvo_service_accepted_total")
    let depth = Gauge(label: "salvo_service_queue_depth")
    let endToEnd = Timer(label: "salvo_service_end_to_end_seconds", preferredDisplayUnit: .seconds)
    let uncertainAfterRestart = Counter(label: "salvo_service_uncertain_after_restart_total")
    /// Rows another worker took over while this one held them (a shared store), before and after it wrote them.
    let leasesLostUnwritten = Counter(label: "salvo_service_leases_lost_total", dimensions: [("written", "false")])
    let leasesLostWritten = Counter(label: "salvo_service_leases_lost_total", dimensions: [("written", "true")])
    /// Outcomes the store refused: the row was another worker's by then.
    let fenced = Counter(label: "salvo_service_fenced_total")
    /// Rows given back unwritten because their lease was about to end without a renewal.
    let lapsed = Counter(label: "salvo_service_leases_lapsed_total")
    /// 1 while the store answers, 0 while it does not.
    let storeUp = Gauge(label: "salvo_service_store_up")

    /// Refused notifications, by the field at fault (`token`, `payload`, …).
    func refused(_ errors: [FieldError]) {
        var byField: [String: Int] = [:]
        for error in errors {
            let field =
                error.field.split(separator: ".", maxSplits: 1).dropFirst().first.map(String.init) ?? "notification"
            byField[field.split(separator: ".").first.map(String.init) ?? field, default: 0] += 1
        }
        for (field, count) in byField {
            Counter(label: "salvo_service_refused_total", dimensions: [("field", field)]).increment(by: count)
        }
    }

    /// Final outcomes, by state and reason.
    func outcomes(_ updates: [OutcomeUpdate], expired: Int) {
        var counts: [String: [String: Int]] = [:]
        // Delivered without a reason, almost every outcome, counted apart from the table (no strings hashed for it).
        var delivered = 0
        for index in updates.indices where updates[index].state.isFinal {
            if updates[index].state == .delivered, updates[index].reason == nil {
                delivered += 1
                continue
            }
            counts[updates[index].state.description, default: [:]][updates[index].reason ?? "", default: 0] += 1
        }
        if delivered > 0 { counts["delivered", default: [:]]["", default: 0] += delivered }
        if expired > 0 { counts["expired", default: [:]]["", default: 0] += expired }
        for (state, reasons) in counts {
            for (reason, count) in reasons {
                Counter(label: "salvo_service_outcomes_total", dimensions: [("state", state), ("reason", reason)])
                    .increment(by: count)
            }
        }
    }
}

extension Timer {
    func recordMilliseconds(_ milliseconds: Int64) {
        self.recordNanoseconds(max(0, milliseconds) * 1_000_000)
    }
}
