import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct FeedbackDecoderTests {
    /// Tuples of every shape the format allows: standard tokens, a zero-length token, odd lengths.
    private static let tuples: [FeedbackTuple] = [
        FeedbackTuple(timestamp: 1_700_000_000, token: (0..<32).map { UInt8($0) }),
        FeedbackTuple(timestamp: 0, token: []),
        FeedbackTuple(timestamp: UInt32.max, token: [0xAB]),
        FeedbackTuple(timestamp: 1_234_567_890, token: (0..<32).map { UInt8(255 - $0) }),
        FeedbackTuple(timestamp: 42, token: Array(repeating: 0x5A, count: 100)),
    ]

    private static var stream: [UInt8] {
        var buffer = ByteBuffer()
        for tuple in tuples { tuple.write(to: &buffer) }
        return buffer.readableArray
    }

    @Test func everySplitPointOfTheStreamGivesTheSameTuples() throws {
        let bytes = Self.stream
        for split in 0...bytes.count {
            var decoder = FeedbackDecoder()
            var tuples = decoder.feed(ByteBuffer(bytes: bytes[..<split]))
            tuples += decoder.feed(ByteBuffer(bytes: bytes[split...]))
            #expect(tuples == Self.tuples, "split at \(split)")
            #expect(decoder.pendingBytes == 0)
            try decoder.finish()
        }
    }

    @Test func everyTwoSplitPointsGiveTheSameTuples() throws {
        let bytes = Array(Self.stream.prefix(80))
        var whole = FeedbackDecoder()
        let expected = whole.feed(ByteBuffer(bytes: bytes))
        for first in 0...bytes.count {
            for second in first...bytes.count {
                var decoder = FeedbackDecoder()
                var tuples: [FeedbackTuple] = []
                for piece in [bytes[..<first], bytes[first..<second], bytes[second...]] {
                    decoder.feed(ByteBuffer(bytes: piece)) { tuples.append($0) }
                }
                #expect(tuples == expected)
                #expect(decoder.pendingBytes == whole.pendingBytes)
            }
        }
    }

    @Test func oneByteAtATimeGivesTheSameTuples() throws {
        var decoder = FeedbackDecoder()
        var tuples: [FeedbackTuple] = []
        for byte in Self.stream { tuples += decoder.feed(ByteBuffer(bytes: [byte])) }
        #expect(tuples == Self.tuples)
        try decoder.finish()
    }

    @Test func aStreamEndingInsideATupleIsNamed() {
        let bytes = Self.stream
        let firstTuple = 6 + 32
        // Ends inside the second tuple's header (3 of its 6 bytes), then inside the first tuple's token.
        var decoder = FeedbackDecoder()
        #expect(decoder.feed(ByteBuffer(bytes: bytes[..<(firstTuple + 3)])).count == 1)
        #expect(throws: FeedbackStreamError(partialBytes: 3, expectedBytes: nil)) { try decoder.finish() }
        var cut = FeedbackDecoder()
        #expect(cut.feed(ByteBuffer(bytes: bytes[..<20])).isEmpty)
        let error = #expect(throws: FeedbackStreamError.self) { try cut.finish() }
        #expect(error == FeedbackStreamError(partialBytes: 20, expectedBytes: 38))
        #expect(error?.description.contains("20 of its 38 bytes") == true)
    }

    @Test func aZeroLengthTokenIsATupleOfItsOwn() throws {
        var decoder = FeedbackDecoder()
        let tuples = decoder.feed(ByteBuffer(bytes: [0, 0, 0, 9, 0, 0, 0, 0, 0, 10, 0, 0]))
        #expect(tuples == [FeedbackTuple(timestamp: 9, token: []), FeedbackTuple(timestamp: 10, token: [])])
        #expect(tuples.allSatisfy { $0.deviceToken == nil })
        try decoder.finish()
    }
}
