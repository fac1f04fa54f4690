import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct GatewayResponseTests {
    @Test func errorResponseMatchesTheGoldenVector() throws {
        var buffer = ByteBuffer()
        ErrorResponse(status: .invalidToken, identifier: Fixtures.identifier).write(to: &buffer)
        #expect(buffer.readableArray == (try TestData.hexVector("error-response.hex")))
    }

    @Test func errorResponseIsReadOnlyWhenComplete() throws {
        let bytes = try TestData.hexVector("error-response.hex")
        var buffer = ByteBuffer()
        for (index, byte) in bytes.enumerated() {
            buffer.writeInteger(byte)
            let response = try ErrorResponse.read(from: &buffer)
            if index < bytes.count - 1 {
                #expect(response == nil)
                #expect(buffer.readableBytes == index + 1)
            } else {
                #expect(response == ErrorResponse(status: .invalidToken, identifier: Fixtures.identifier))
                #expect(buffer.readableBytes == 0)
            }
        }
    }

    @Test func unknownStatusCodesAreKept() throws {
        var buffer = ByteBuffer(bytes: [8, 42, 0, 0, 0, 9])
        let response = try #require(try ErrorResponse.read(from: &buffer))
        #expect(response.status.rawValue == 42)
        #expect(response.status.name == "status 42")
        #expect(ErrorStatus.shutdown.description == "10 (shutdown)")
    }

    @Test func aStreamThatIsNotAnErrorResponseIsAWireError() {
        var buffer = ByteBuffer(bytes: [7, 1, 0, 0, 0, 1])
        #expect(throws: WireError(.unexpectedCommand, value: 7)) { try ErrorResponse.read(from: &buffer) }
        #expect(buffer.readableBytes == 6)
    }

    @Test func feedbackTuplesMatchTheGoldenVectorAndAnyTokenLength() throws {
        let tuples = [
            FeedbackTuple(timestamp: 1_700_000_000, token: Fixtures.token),
            FeedbackTuple(timestamp: 1_700_000_500, token: Array(1...20)),
        ]
        var buffer = ByteBuffer()
        for tuple in tuples { tuple.write(to: &buffer) }
        let golden = try TestData.hexVector("feedback.hex")
        #expect(buffer.readableArray == golden)

        // Fed one byte at a time, each tuple appears exactly when its last byte arrives.
        var input = ByteBuffer()
        var read: [FeedbackTuple] = []
        for byte in golden {
            input.writeInteger(byte)
            if let tuple = FeedbackTuple.read(from: &input) { read.append(tuple) }
        }
        #expect(read == tuples)
        #expect(read[0].deviceToken == Fixtures.token)
        #expect(read[1].deviceToken == nil)
    }
}
