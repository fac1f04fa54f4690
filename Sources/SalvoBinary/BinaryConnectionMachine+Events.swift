import APNSWire
import DequeModule
import SalvoRows

/// What the machine answers (`Action`) and hears about connections (`ConnectFailure`, `CloseCause`).
extension BinaryConnectionMachine {
    /// What the driver does next.
    enum Action: Equatable {
        /// Nothing now; wait for the next event.
        case none
        /// Open a connection; report `opened` or `connectFailed`.
        case connect
        /// Call `reconnectDue` after this many nanoseconds.
        case reconnect(afterNanoseconds: UInt64)
        /// Take the next chunk from the source (`rowsArrived` / `sourceExhausted`), then write again.
        case needRows
        /// Write the encoded batch now (`flushed`), then write again.
        case flush
        /// Call `flushDue` (and write again) after this many nanoseconds: a batch to flush by age, or a full flight
        /// whose quiet time runs out.
        case scheduleFlush(afterNanoseconds: UInt64)
        /// Append the barrier with this identifier to the batch and write it (`flushed`); then wait.
        case writeBarrier(identifier: UInt32)
        /// Call `write` again (room opened up).
        case write
        /// The gateway answered and will close: close the connection in order.
        case close
        /// Drop the connection at once (report `closed(.local, …)` when it is gone).
        case abort
        /// Every row is settled: close and report success.
        case finish
        /// The job cannot go on: abort and report the error.
        case fail(JobError)
        /// The machine got an event its state rules out (a driver's mistake): nothing changed. The driver logs it
        /// and treats it as a connection error: the connection, if any, is dropped and settles as any drop does.
        case impossible(ImpossibleEvent)
    }

    /// An event the machine's state rules out, by name.
    enum ImpossibleEvent: String, Equatable, Sendable {
        /// `start` on a machine already started.
        case startWhileRunning = "start while already running"
        /// `reconnectDue` while connecting or connected: only one reconnect delay runs, and only while idle.
        case reconnectWhileConnected = "a reconnect while connecting or connected"
        /// `opened` with no connect asked for.
        case openedWithoutConnect = "a connection opened that was not asked for"
        /// `connectFailed` with no connect asked for.
        case connectFailedWithoutConnect = "a failed connect that was not asked for"
        /// `closed` with no connection open.
        case closedWithoutConnection = "a close with no connection open"
    }

    /// Why a connect failed.
    enum ConnectFailure: Equatable {
        /// The credentials or the gateway's identity were refused: every try would fail alike.
        case credentials(String)
        /// The gateway could not be reached (refused, reset, timed out).
        case unreachable(String)
        /// Retrying cannot help (the name does not resolve, the peer does not speak TLS): stop at once.
        case hopeless(String)
    }

    /// Why a connection ended.
    enum CloseCause: Equatable {
        /// We closed it.
        case local
        /// The peer closed or reset it, or it failed.
        case remote(String)
        /// The gateway refused the client certificate during or right after the handshake.
        case certificateRefused(String)
    }
}
