import APNSWire
import NIOCore
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// A row's own headers (a service's notification) on the wire, and what the client reads of an answer.
@Suite(.tags(.pure), .runs(.pure)) struct RowHeadersTests {
    @Test func theWireEnginesLiteralsDecodeAndChangeNoTable() throws {
        var block = ByteBuffer()
        let topic = String(repeating: "t", count: 200)
        HTTP2WireConnectionHandler.writeLiteral(
            name: "apns-id",
            value: "00000000-0000-4000-8000-000000000001",
            into: &block
        )
        HTTP2WireConnectionHandler.writeLiteral(name: "apns-topic", value: topic, into: &block)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: "apns-id") == "00000000-0000-4000-8000-000000000001")
        #expect(headers.first(name: "apns-topic") == topic)
    }

    @Test func aRowsHeadersReplaceTheJobsOfTheSameName() throws {
        let template = HTTP2RequestTemplate(
            authority: "api.push.apple.com",
            headers: try APNSRequestHeaders(pushType: .alert, priority: .immediate, topic: "com.example.job"),
            payload: try Payload(json: #"{"aps":{}}"#)
        )
        let row = HTTP2RowHeaders(
            try APNSRequestHeaders(id: "00000000-0000-4000-8000-000000000002", topic: "com.example.row")
        )
        let headers = template.headers(
            token: try DeviceToken(hex: String(repeating: "ab", count: 32)),
            authorization: nil,
            rowHeaders: row
        )
        #expect(headers[canonicalForm: "apns-topic"] == ["com.example.row"])
        #expect(headers.first(name: "apns-priority") == "10")
        #expect(headers.first(name: "apns-id") == "00000000-0000-4000-8000-000000000002")
    }

    @Test func aRowsFieldsAreTheHeadersFieldsInTheirOrder() throws {
        let every = try APNSRequestHeaders(
            pushType: .liveActivity,
            id: "00000000-0000-4000-8000-000000000003",
            expiration: 1_800_000_000,
            priority: .powerConsiderate,
            topic: "com.example.app.push-type.liveactivity",
            collapseID: "c"
        )
        for headers in [every, try APNSRequestHeaders(topic: "com.example.app"), try APNSRequestHeaders()] {
            #expect(
                HTTP2RowHeaders(headers).fields.map { [$0.name, $0.value] }
                    == headers.fields().map { [$0.name, $0.value] }
            )
        }
    }

    @Test func anAnswersUniqueIDIsRead() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var block = ByteBuffer()
        try encoder.encode(
            headers: [":status": "200", "apns-id": "A", "apns-unique-id": "b2f4e5c6-0000-4000-8000-000000000003"],
            to: &block
        )
        var decoder = HTTP2AnswerDecoder()
        let fields = try decoder.decode(&block)
        #expect(fields.status == 200 && fields.apnsID == "A")
        #expect(fields.apnsUniqueID == "b2f4e5c6-0000-4000-8000-000000000003")
    }
}
