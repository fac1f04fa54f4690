import NIOCore

extension HTTP2ConnectionMachine {
    /// Where a connection is in its life.
    enum State: Hashable {
        /// Opened; the server's SETTINGS have not come, so no request is written yet.
        case connecting
        /// Taking rows, as many as the server's limit, our cap and the credentials gate allow.
        case open(remoteMaximumStreams: Int)
        /// After GOAWAY or with its stream ids used up: no new rows; streams up to `lastStreamID` finish, then the
        /// connection closes.
        case draining(lastStreamID: Int32)
        /// Closing or closed: every stream is settled, and nothing more happens.
        case closed
    }

    /// A request in flight: its row, the token it was signed with, and what its answer has brought so far.
    struct Stream {
        var item: HTTP2WorkItem
        var bearer: ProviderToken.Bearer?
        var status: Int?
        var apnsID: String?
        var apnsUniqueID: String?
        var retryAfter: Int64?
        var body: ByteBuffer?
        var sentAt: NIODeadline
    }
}
