import NIOCore

extension HTTP2ConnectionMachine {
    /// What a connection's decisions depend on, set once per job.
    struct Configuration: Sendable {
        /// Our own cap on streams in flight, below the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (`Int.max`: none).
        var maximumStreams: Int
        var requestTimeout: TimeAmount
        var pingInterval: TimeAmount
        var pingTimeout: TimeAmount
        var retry: HTTP2RetryPolicy
        /// Whether 200 answers are listed with their `apns-id`s.
        var recordDeliveries: Bool
        /// The most requests written with one flush.
        var batchLimit = 512
        /// Streams the flight window grows by per window's worth of accepted answers after a 429 cut it.
        var additiveIncrease = 8.0
        /// Refused streams per row before it is left unsent (they use none of its attempts).
        var maximumRefusals = 8
        /// Sends of one row lost with their stream or connection before it is left uncertain (they use none of
        /// its attempts: a connection reset while a row is in flight says nothing about the row).
        var maximumLosses = 16
        /// How long after the connection opened (TCP, and TLS when used) the server's SETTINGS may take; nil: as
        /// long as the PING checks allow.
        var settingsTimeout: TimeAmount?
        /// The longest request body of the job (bytes), which a stream's whole window must take; 0: not checked.
        var largestBody = 0
        /// How soon a connection that found no row ready looks again (a row given back by another connection, or
        /// one that arrived): a bulk job's rows are read ahead, so 20 ms costs it nothing; a service's rows arrive
        /// one request at a time, and the wait adds to each one's latency.
        var lookAgain: TimeAmount = .milliseconds(20)
    }
}
