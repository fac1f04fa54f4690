import NIOCore

/// The feedback service's byte stream as tuples, however the reads split it: bytes go in as they arrive, whole
/// tuples come out, and what is left at the end of the stream is named by `finish`.
///
/// A pure value with no I/O: the connection that owns it feeds it on its own queue. A token of any length is
/// passed through (zero bytes included); the caller decides what a token that is not 32 bytes means.
public struct FeedbackDecoder: Sendable {
    private var pending = ByteBuffer()

    public init() {}

    /// Bytes received but not yet part of a whole tuple.
    public var pendingBytes: Int { self.pending.readableBytes }

    /// Appends `bytes` (copied: the caller may reuse its buffer) and returns every tuple now whole.
    public mutating func feed(_ bytes: ByteBuffer) -> [FeedbackTuple] {
        var tuples: [FeedbackTuple] = []
        self.feed(bytes) { tuples.append($0) }
        return tuples
    }

    /// Appends `bytes` and calls `body` with each tuple now whole, in order.
    public mutating func feed(_ bytes: ByteBuffer, _ body: (FeedbackTuple) -> Void) {
        var bytes = bytes
        self.pending.writeBuffer(&bytes)
        while let tuple = FeedbackTuple.read(from: &self.pending) { body(tuple) }
        self.pending.discardReadBytes()
    }

    /// The stream ended: throws when it stopped inside a tuple.
    public func finish() throws(FeedbackStreamError) {
        let left = self.pending.readableBytes
        guard left > 0 else { return }
        let expected = self.pending.getInteger(at: self.pending.readerIndex + 4, as: UInt16.self).map { 6 + Int($0) }
        throw FeedbackStreamError(partialBytes: left, expectedBytes: expected)
    }
}

/// The feedback stream ended inside a tuple.
public struct FeedbackStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Bytes of the unfinished tuple that arrived.
    public var partialBytes: Int
    /// The whole tuple's size, when its header arrived (6 + the token length).
    public var expectedBytes: Int?

    public init(partialBytes: Int, expectedBytes: Int?) {
        self.partialBytes = partialBytes
        self.expectedBytes = expectedBytes
    }

    public var description: String {
        if let expectedBytes {
            return
                "the feedback stream ended inside a tuple: \(self.partialBytes) of its \(expectedBytes) bytes arrived"
        }
        return "the feedback stream ended inside a tuple header: \(self.partialBytes) of its 6 bytes arrived"
    }
}
