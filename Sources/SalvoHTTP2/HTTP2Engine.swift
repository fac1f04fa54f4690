/// The code that speaks HTTP/2 on a job's connections. Both drive the same `HTTP2ConnectionMachine`, so rows
/// end the same way with either; they differ in what a request costs.
public enum HTTP2Engine: String, Sendable, CaseIterable {
    /// Salvo's own client codec (`HTTP2WireConnectionHandler`): APNSWire's frame reader, a header block encoded
    /// once per connection and token, one buffer per flush.
    case wire
    /// NIOHTTP2's `NIOHTTP2Handler` at frame level, with `HTTP2ConnectionHandler`.
    case nio
}

/// What a connection slot needs of the handler that drives a connection, whichever the engine.
protocol HTTP2ConnectionDriver: AnyObject {
    /// Called on the event loop when the connection takes no more rows: the slot opens a replacement.
    var onGoAway: (() -> Void)? { get set }
    /// Called on the event loop when the server's first SETTINGS arrive.
    var onReady: (() -> Void)? { get set }
    /// Whether the server's SETTINGS have arrived on this connection.
    var isReady: Bool { get }
    /// Whether the connection read any answer (of any status): a connection that ends without one was of no use,
    /// and the job backs off before the next (`HTTP2ReconnectPacer`).
    var answered: Bool { get }
    /// Why this connection failed before it was ready in a way retrying cannot heal, if it did.
    var hopeless: String? { get set }
    /// Whether the connection closed because the job had no row left for it: it is not replaced.
    var finished: Bool { get }
}
