import APNSWire
import SalvoRows

/// What one read of the feedback service returned: the tuples with standard tokens, and every problem named.
///
/// The service clears its list once it has sent it, so a read that ends badly still hands back every tuple that
/// arrived whole; `problems` says what went wrong, and the caller decides whether that fails the run.
public struct FeedbackRead: Sendable {
    /// Tuples with a 32-byte token, in the order the service sent them.
    public var entries: [Entry]
    /// Tuples that could not be used (a zero-length or odd-length token), the end inside a tuple, or a
    /// connection that ended with an error after the handshake, each named.
    public var problems: [String]

    /// One device token the service called gone, and since when.
    public struct Entry: Hashable, Sendable {
        public var token: DeviceToken
        /// When the service found the app gone (UNIX seconds).
        public var timestamp: UInt32

        public init(token: DeviceToken, timestamp: UInt32) {
            self.token = token
            self.timestamp = timestamp
        }
    }

    public init(entries: [Entry] = [], problems: [String] = []) {
        self.entries = entries
        self.problems = problems
    }

    /// Adds one decoded tuple: the `index`th of the stream (from 1).
    mutating func add(_ tuple: FeedbackTuple, index: Int) {
        guard let token = tuple.deviceToken else {
            self.problems.append(
                "tuple \(index) (timestamp \(tuple.timestamp)) has a \(tuple.token.count)-byte token, not 32: skipped"
            )
            return
        }
        self.entries.append(Entry(token: token, timestamp: tuple.timestamp))
    }
}
