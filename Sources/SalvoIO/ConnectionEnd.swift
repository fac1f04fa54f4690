/// Why a connection ended, delivered once to `TLSConnection.onClose`.
///
/// Peer close (EOF, with or without close_notify) and reset (ECONNRESET/EPIPE) are distinct reasons:
/// after a reset, bytes we sent may not have been read.
public struct ConnectionEnd: Sendable, CustomStringConvertible {
    /// The kind of ending. Compare with `==`.
    public struct Reason: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        public var description: String { name }

        /// We closed (`close` or `abort`).
        public static let closedLocally = Reason("closedLocally")
        /// The peer closed: close_notify and/or EOF.
        public static let peerClosed = Reason("peerClosed")
        /// The peer reset the connection.
        public static let reset = Reason("reset")
        /// A TLS or system error ended the connection; see `error`.
        public static let failed = Reason("failed")
    }

    /// The kind of ending.
    public var reason: Reason
    /// Whether the peer sent close_notify before closing (an orderly TLS shutdown).
    public var peerSentCloseNotify: Bool
    /// The error behind `.reset` and `.failed`.
    public var error: SalvoIOError?

    /// An ending with `reason`; `error` for `.reset` and `.failed`.
    public init(reason: Reason, peerSentCloseNotify: Bool = false, error: SalvoIOError? = nil) {
        self.reason = reason
        self.peerSentCloseNotify = peerSentCloseNotify
        self.error = error
    }

    public var description: String {
        var text = reason.description
        if peerSentCloseNotify {
            text += " (close_notify)"
        }
        if let error {
            text += ": \(error)"
        }
        return text
    }
}
