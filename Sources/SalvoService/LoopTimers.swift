import NIOConcurrencyHelpers
import NIOCore

/// The service's timers, on the event loop of its own group, that never outlive it: `close()` (right before the
/// group shuts down) makes every later timer run its body at once, so that nothing asks a loop that is gone
/// (which NIO reports, and will refuse), and whatever waited on a timer ends with the service.
///
/// A timer is scheduled under the same lock `close()` takes, so that no timer is scheduled after it.
final class LoopTimers: Sendable {
    private let loop: any EventLoop
    private let closed = NIOLockedValueBox(false)

    init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Runs `body` after `delay` on the loop; at once, here, when the timers are closed.
    func schedule(in delay: TimeAmount, _ body: @escaping @Sendable () -> Void) {
        let scheduled = self.closed.withLockedValue { closed -> Bool in
            guard !closed else { return false }
            self.loop.scheduleTask(in: delay, body)
            return true
        }
        if !scheduled { body() }
    }

    /// No timer is scheduled from here on (the group is about to shut down; the ones pending are cancelled with it).
    func close() {
        self.closed.withLockedValue { $0 = true }
    }
}
