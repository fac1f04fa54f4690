import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct FrameEncodingTests {
    @Test func commandZeroMatchesTheGoldenVector() throws {
        var buffer = ByteBuffer()
        let written = buffer.writeNotificationFrame(command: .simple, token: Fixtures.token, payload: Fixtures.hello)
        let golden = try TestData.hexVector("command0.hex")
        #expect(buffer.readableArray == golden)
        #expect(written == golden.count)
    }

    @Test func commandOneMatchesTheGoldenVector() throws {
        var buffer = ByteBuffer()
        buffer.writeNotificationFrame(
            command: .enhanced,
            token: Fixtures.token,
            payload: Fixtures.hello,
            identifier: Fixtures.identifier,
            expiry: Fixtures.expiry
        )
        #expect(buffer.readableArray == (try TestData.hexVector("command1.hex")))
    }

    @Test func commandTwoMatchesTheGoldenVector() throws {
        var buffer = ByteBuffer()
        buffer.writeNotificationFrame(
            command: .framed,
            token: Fixtures.token,
            payload: Fixtures.hello,
            identifier: Fixtures.identifier,
            expiry: Fixtures.expiry,
            priority: .immediate
        )
        #expect(buffer.readableArray == (try TestData.hexVector("command2.hex")))
    }

    @Test(arguments: FrameCommand.allCases)
    func templateWritesTheSameBytesAsTheEncoder(command: FrameCommand) throws {
        let payload = try Payload(jsonBytes: Fixtures.hello)
        let template = try FrameTemplate(command: command, payload: payload, expiry: Fixtures.expiry)
        var fromTemplate = ByteBuffer()
        var fromEncoder = ByteBuffer()
        for index in 0..<5 {
            var bytes = Fixtures.token.bytes
            bytes[0] = UInt8(index)
            let token = try DeviceToken(bytes: bytes)
            let identifier = Fixtures.identifier &+ UInt32(index)
            template.write(token: token, identifier: identifier, to: &fromTemplate)
            fromEncoder.writeNotificationFrame(
                command: command,
                token: token,
                payload: Fixtures.hello,
                identifier: identifier,
                expiry: Fixtures.expiry
            )
        }
        #expect(fromTemplate.readableArray == fromEncoder.readableArray)
        #expect(fromTemplate.readableBytes == 5 * template.frameByteCount)
        if command == .framed {
            // The template of the golden vector's fields reproduces the vector byte for byte.
            var one = ByteBuffer()
            template.write(token: Fixtures.token, identifier: Fixtures.identifier, to: &one)
            #expect(one.readableArray == (try TestData.hexVector("command2.hex")))
        }
    }

    @Test func templateWritesABatchOfFramesBackToBack() throws {
        let template = try FrameTemplate(command: .framed, payload: try Payload(jsonBytes: Fixtures.hello))
        var buffer = ByteBuffer()
        for index in 0..<3 {
            template.write(token: Fixtures.token, identifier: UInt32(index + 1), to: &buffer)
        }
        #expect(buffer.readableBytes == 3 * template.frameByteCount)
        let decoder = FrameDecoder()
        for expected in 1...3 {
            guard case .notification(let notification)? = decoder.decode(&buffer) else {
                Issue.record("frame \(expected) did not decode")
                return
            }
            #expect(notification.identifier == UInt32(expected))
        }
        #expect(buffer.readableBytes == 0)
    }

    @Test func templateRefusesWhatTheGatewayWould() throws {
        let big = Payload(aps: APS(alert: .text(String(repeating: "x", count: 300))))
        #expect(throws: PayloadError.self) { try FrameTemplate(command: .enhanced, payload: big) }
        #expect(throws: Never.self) { try FrameTemplate(command: .framed, payload: big) }

        let silent = Payload(aps: APS(contentAvailable: true))
        #expect(throws: PayloadError.self) {
            try FrameTemplate(command: .framed, payload: silent, priority: .immediate)
        }
        #expect(throws: Never.self) {
            try FrameTemplate(command: .framed, payload: silent, priority: .powerConsiderate)
        }
        #expect(throws: PayloadError.self) {
            try FrameTemplate(command: .framed, payload: try Payload(jsonBytes: Fixtures.hello), priority: .low)
        }
    }
}
