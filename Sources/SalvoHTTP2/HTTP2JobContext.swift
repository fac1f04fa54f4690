import NIOConcurrencyHelpers
import NIOCore
import SalvoEngine

/// What every connection of a job shares: the work queue, the request template, the token, the policies, and
/// the results gathered so far.
///
/// Thread-safe: its fields are immutable or locked; connections merge their results once per read batch.
final class HTTP2JobContext: Sendable {
    let work: HTTP2WorkQueue
    let template: HTTP2RequestTemplate
    let token: ProviderToken?
    let retry: HTTP2RetryPolicy
    let onUncertain: OnUncertain
    let recordDeliveries: Bool
    let requestTimeout: TimeAmount
    let pingInterval: TimeAmount
    let pingTimeout: TimeAmount
    /// Our own cap on streams per connection, below the server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    let maximumStreams: Int
    let results = NIOLockedValueBox(HTTP2JobResult())
    /// Connection failures and protocol errors, for the report's explanation when a job cannot finish.
    let connectionErrors = NIOLockedValueBox([String]())

    init(
        work: HTTP2WorkQueue,
        template: HTTP2RequestTemplate,
        token: ProviderToken?,
        retry: HTTP2RetryPolicy,
        onUncertain: OnUncertain,
        recordDeliveries: Bool,
        requestTimeout: TimeAmount,
        pingInterval: TimeAmount,
        pingTimeout: TimeAmount,
        maximumStreams: Int
    ) {
        self.work = work
        self.template = template
        self.token = token
        self.retry = retry
        self.onUncertain = onUncertain
        self.recordDeliveries = recordDeliveries
        self.requestTimeout = requestTimeout
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.maximumStreams = maximumStreams
    }

    func noteConnectionError(_ message: String) {
        self.connectionErrors.withLockedValue { errors in
            // Bounded: the first few explain a failure; thousands would not.
            if errors.count < 32 { errors.append(message) }
        }
    }
}
