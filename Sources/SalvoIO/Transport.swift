/// Receives what a `Transport` has to report. Called on the transport's queue.
protocol TransportDelegate: AnyObject {
    /// Every byte of the last `send` is now in the kernel; the caller's memory is free again.
    func transportDidSend()
    /// Bytes arrived; `bytes` is valid only during the call. The transport posts its next receive after
    /// the call returns (unless receiving was paused).
    func transportDidReceive(_ bytes: UnsafeRawBufferPointer)
    /// The peer closed its sending side (recv returned 0).
    func transportDidReachEOF()
    /// A send or receive failed (reset, or another errno). The transport stops; call `close`.
    func transportDidFail(_ error: SalvoIOError)
    /// `close` finished: no operation is in flight and the descriptor is closed.
    func transportDidClose()
}

/// Counters a transport keeps, for tests and diagnostics.
public struct TransportStatistics: Sendable, Equatable {
    /// `send`s requested by the connection (one per flushed batch).
    public var sends = 0
    /// Times the kernel took only part of a send, so the rest was sent by a further operation.
    public var partialSends = 0
    /// Bytes handed to the kernel.
    public var bytesSent = 0
    /// Receives that returned data.
    public var receives = 0
    /// Bytes received.
    public var bytesReceived = 0

    /// All counters at zero.
    public init() {}
}

/// Moves bytes between a connected socket and memory, one send in flight at a time, receiving
/// continuously. Implemented by io_uring (`UringTransport`) and by non-blocking sockets with
/// DispatchSources (`SocketTransport`); both are confined to their context's queue.
protocol Transport: AnyObject {
    var delegate: TransportDelegate? { get set }
    var statistics: TransportStatistics { get }

    /// Sends all of `bytes`, continuing partial sends in order. Returns true when every byte reached the
    /// kernel during the call (and `transportDidSend` will not be called); otherwise `transportDidSend`
    /// follows later, never from inside this call, so callers cannot recurse without bound.
    /// At most one send is in flight; the caller keeps the memory alive and unchanged until it is done.
    func send(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Starts the receive loop (idempotent).
    func startReceiving()
    /// Stops posting receives after the current one; `resumeReceiving` continues.
    func pauseReceiving()
    func resumeReceiving()
    /// Cancels what is in flight, closes the descriptor and calls `transportDidClose`. With `reset`, the
    /// socket is closed with `SO_LINGER` 0, so the peer sees a reset rather than an orderly close.
    func close(reset: Bool)
    /// Half-closes the sending side (`shutdown(SHUT_WR)`): the peer reads EOF after our last byte.
    func shutdownOutput()
}
