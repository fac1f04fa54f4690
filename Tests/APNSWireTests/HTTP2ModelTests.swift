import APNSWire
import Testing

@Suite struct HTTP2ModelTests {
    @Test func headersAreWrittenInOrder() throws {
        let headers = try APNSRequestHeaders(
            pushType: .alert,
            id: "123e4567-e89b-12d3-a456-426614174000",
            expiration: 0,
            priority: .powerConsiderate,
            topic: "com.example.app",
            collapseID: "c1"
        )
        let fields = headers.fields(authorization: "bearer abc")
        #expect(
            fields.map(\.name) == [
                "authorization", "apns-push-type", "apns-id", "apns-expiration", "apns-priority", "apns-topic",
                "apns-collapse-id",
            ]
        )
        #expect(
            fields.map(\.value) == [
                "bearer abc", "alert", "123e4567-e89b-12d3-a456-426614174000", "0", "5", "com.example.app", "c1",
            ]
        )
        // The server side reads back what the client wrote.
        #expect(try APNSRequestHeaders(fields: fields) == headers)
    }

    @Test func collapseIDLimitIsExact() throws {
        _ = try APNSRequestHeaders(collapseID: String(repeating: "c", count: 64))
        #expect(throws: APNSReason.badCollapseId) {
            try APNSRequestHeaders(collapseID: String(repeating: "c", count: 65))
        }
        // Bytes, not characters: 22 three-byte characters are 66 bytes.
        #expect(throws: APNSReason.badCollapseId) {
            try APNSRequestHeaders(collapseID: String(repeating: "€", count: 22))
        }
    }

    @Test func serverSideValidationNamesTheReason() {
        let cases: [([(name: String, value: String)], APNSReason)] = [
            ([("apns-id", "123E4567-E89B-12D3-A456-426614174000")], .badMessageId),
            ([("apns-id", "not-a-uuid")], .badMessageId),
            ([("apns-expiration", "soon")], .badExpirationDate),
            ([("apns-priority", "7")], .badPriority),
            ([("apns-push-type", "carrier-pigeon")], .invalidPushType),
            ([("apns-topic", "a"), ("APNS-TOPIC", "b")], .duplicateHeaders),
            ([("apns-collapse-id", String(repeating: "x", count: 65))], .badCollapseId),
        ]
        for (fields, reason) in cases {
            #expect(throws: reason, "\(fields)") { try APNSRequestHeaders(fields: fields) }
        }
    }

    @Test func reasonsKnowTheirStatusAndUnknownOnesAreKept() {
        #expect(APNSReason.badDeviceToken.status == 400)
        #expect(APNSReason.expiredProviderToken.status == 403)
        #expect(APNSReason.badPath.status == 404)
        #expect(APNSReason.methodNotAllowed.status == 405)
        #expect(APNSReason.unregistered.status == 410)
        #expect(APNSReason.payloadTooLarge.status == 413)
        #expect(APNSReason.tooManyRequests.status == 429)
        #expect(APNSReason.internalServerError.status == 500)
        #expect(APNSReason.shutdown.status == 503)
        #expect(APNSReason.known.count == 29)
        let novel = APNSReason(rawValue: "SomethingNew")
        #expect(novel.status == nil)
        #expect(novel.rawValue == "SomethingNew")
        #expect(APNSReason.tooManyRequests.isRetryable && !APNSReason.badDeviceToken.isRetryable)
        #expect(APNSReason.badCertificateEnvironment.stopsTheJob)
    }

    @Test func errorBodiesRoundTrip() throws {
        let gone = APNSErrorBody(reason: .unregistered, timestamp: 1_700_000_000_123)
        #expect(
            String(decoding: gone.jsonBytes, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000123}"#
        )
        #expect(APNSErrorBody(jsonBytes: gone.jsonBytes) == gone)
        #expect(APNSErrorBody(jsonBytes: Array(#"{"reason":"Novel"}"#.utf8))?.reason.rawValue == "Novel")
        #expect(APNSErrorBody(jsonBytes: Array("nope".utf8)) == nil)
    }
}
