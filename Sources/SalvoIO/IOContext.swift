import Dispatch

/// The owner of I/O for a group of connections: one serial DispatchQueue and, for io_uring, one ring.
///
/// Every connection made with a context is confined to `queue`: its callbacks run there and its methods
/// must be called there. Create one context per shard; nothing in it is shared with other contexts.
/// `@unchecked Sendable` because all mutable state (the ring) is confined to `queue`.
public final class IOContext: @unchecked Sendable {
    /// The serial queue that confines this context's connections.
    public let queue: DispatchQueue
    /// The transport its connections use.
    public let transport: TransportKind
    let ring: IORing?

    /// Creates a context on `queue`. With `transport == nil` the probe chooses (`TransportKind.probed`); the
    /// caller passes a user's choice. Throws `.ioUringUnavailable` when io_uring is asked for but refused.
    public init(queue: DispatchQueue, transport: TransportKind? = nil) throws {
        self.queue = queue
        let kind = transport ?? TransportKind.probed
        self.transport = kind
        if kind == .uring {
            if let refusal = TransportKind.uringRefusal {
                throw SalvoIOError(.ioUringUnavailable, "io_uring is refused here: \(refusal)")
            }
            ring = try IORing(queue: queue)
        } else {
            ring = nil
        }
    }
}
