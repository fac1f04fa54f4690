import NIOConcurrencyHelpers

/// A request to stop a running job from outside it (a signal, a caller's deadline), in two steps: the first
/// `request` stops taking rows and gives the rows in flight `grace` to settle; a second one (or the grace running
/// out) stops at once. Either way the job returns its result, with the rows it did not settle counted.
///
/// Thread-safe: any thread may request; the job registers one handler.
public final class JobStop: Sendable {
    private struct State {
        var requests = 0
        var reason: String?
        var handler: (@Sendable (_ immediate: Bool) -> Void)?
        /// The job has begun to hear requests (`begin`, `install`; it stays true once the job detaches).
        var begun = false
    }

    /// How long rows in flight may take to settle after the first request.
    public let grace: Duration
    private let state = NIOLockedValueBox(State())
    /// Held while the handler is called, so that `detach` waits for a call under way. Handlers do not request.
    private let calling = NIOLock()

    public init(grace: Duration = .seconds(2)) {
        self.grace = grace
    }

    /// Asks the job to stop; `reason` goes into the report ("interrupted (SIGINT)"). The first call drains,
    /// the second stops at once.
    public func request(reason: String) {
        self.calling.withLock { self.requestLocked(reason: reason) }
    }

    /// `request`, unless the job has not begun (`begin`, or its handler installed): then `end`, which ends the
    /// process, is called under the lock `begin` and `install` take, so that no job begins meanwhile. For a command
    /// whose work before the job (reading a query's rows, standard input) does not watch for a stop: nothing has been
    /// sent, and a signal there ends the process at once rather than after that work.
    public func request(reason: String, orBeforeStart end: () -> Never) {
        self.calling.withLock {
            if !self.state.withLockedValue({ $0.begun }) { end() }
            self.requestLocked(reason: reason)
        }
    }

    private func requestLocked(reason: String) {
        let (handler, immediate) = self.state.withLockedValue { state in
            state.requests += 1
            if state.reason == nil { state.reason = reason }
            return (state.handler, state.requests > 1)
        }
        handler?(immediate)
    }

    /// Why the job was asked to stop, or nil.
    public var reason: String? { self.state.withLockedValue { $0.reason } }

    /// The job's way to hear a request (called at once if one came before the job started).
    public func install(_ handler: @escaping @Sendable (_ immediate: Bool) -> Void) {
        self.calling.withLock {
            let requests = self.state.withLockedValue { state in
                state.handler = handler
                state.begun = true
                return state.requests
            }
            if requests > 0 { handler(requests > 1) }
        }
    }

    /// From here on the job hears requests (what it does before its handler is installed polls `reason`): a
    /// `request(reason:orBeforeStart:)` is a request, no longer the end of the process.
    public func begin() {
        self.calling.withLock { self.state.withLockedValue { $0.begun = true } }
    }

    /// The job has ended: its handler is dropped, and once this returns no call of it is under way or can begin. A
    /// job calls it before it tears down what its handler reaches (an HTTP/2 job's event loops: a signal that came
    /// after the job gave up had its handler schedule on loops already shut down, which NIO refuses with a crash).
    /// Requests after it are still counted (`reason`).
    public func detach() {
        self.calling.withLock {
            self.state.withLockedValue { $0.handler = nil }
        }
    }
}
