import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct FrameDecoderTests {
    private func frame(_ command: FrameCommand, payload: [UInt8] = Fixtures.hello, priority: UInt8 = 10) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeNotificationFrame(
            command: command,
            token: Fixtures.token,
            payload: payload,
            identifier: Fixtures.identifier,
            expiry: Fixtures.expiry,
            priority: NotificationPriority(rawValue: priority)
        )
        return buffer
    }

    @Test(arguments: FrameCommand.allCases)
    func roundTrips(command: FrameCommand) throws {
        var buffer = self.frame(command)
        let result = FrameDecoder().decode(&buffer)
        guard case .notification(let decoded)? = result else {
            Issue.record("expected a notification, got \(String(describing: result))")
            return
        }
        #expect(decoded.command == command)
        #expect(decoded.token == Fixtures.token)
        #expect(decoded.payload.readableArray == Fixtures.hello)
        #expect(decoded.identifier == (command == .simple ? 0 : Fixtures.identifier))
        #expect(decoded.expiry == (command == .simple ? 0 : Fixtures.expiry))
        #expect(decoded.priority == 10)
        #expect(buffer.readableBytes == 0)
    }

    @Test(arguments: FrameCommand.allCases)
    func waitsForWholeFramesWhenFedOneByteAtATime(command: FrameCommand) throws {
        let whole = self.frame(command).readableArray + self.frame(command).readableArray
        let decoder = FrameDecoder()
        var input = ByteBuffer()
        var decoded = 0
        for (index, byte) in whole.enumerated() {
            input.writeInteger(byte)
            let before = input.readerIndex
            if let result = decoder.decode(&input) {
                guard case .notification(let notification) = result else {
                    Issue.record("malformed at byte \(index)")
                    return
                }
                #expect(notification.token == Fixtures.token)
                decoded += 1
                #expect(index == decoded * whole.count / 2 - 1, "a frame completes exactly at its last byte")
            } else {
                #expect(input.readerIndex == before, "an incomplete frame consumes nothing")
            }
        }
        #expect(decoded == 2)
    }

    @Test func decodesGoldenVectors() throws {
        for name in ["command0.hex", "command1.hex", "command2.hex"] {
            var buffer = ByteBuffer(bytes: try TestData.hexVector(name))
            guard case .notification(let decoded)? = FrameDecoder().decode(&buffer) else {
                Issue.record("\(name) did not decode")
                continue
            }
            #expect(decoded.token.hexString == Fixtures.tokenHex)
            #expect(String(buffer: decoded.payload) == #"{"aps":{"alert":"Hello"}}"#)
        }
    }

    // MARK: - malformations and their status codes

    private func malformed(_ bytes: [UInt8], decoder: FrameDecoder = FrameDecoder()) -> MalformedFrame? {
        var buffer = ByteBuffer(bytes: bytes)
        guard case .malformed(let frame)? = decoder.decode(&buffer) else { return nil }
        return frame
    }

    /// A command 2 frame built item by item: `items` are (id, data).
    private func framed(_ items: [(UInt8, [UInt8])]) -> [UInt8] {
        var data: [UInt8] = []
        for (id, bytes) in items {
            data.append(id)
            data.append(contentsOf: [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xff)])
            data.append(contentsOf: bytes)
        }
        let length = UInt32(data.count)
        return [2, UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
            + data
    }

    private let id: [UInt8] = [0, 0, 0, 42]

    @Test func missingTokenIsStatus2() {
        let result = self.malformed(self.framed([(2, Fixtures.hello), (3, self.id)]))
        #expect(result == MalformedFrame(status: .missingDeviceToken, identifier: 42, command: .framed))
        let empty = self.malformed(self.framed([(1, []), (2, Fixtures.hello), (3, self.id)]))
        #expect(empty?.status == .missingDeviceToken)
    }

    @Test(arguments: [1, 31, 33, 64])
    func wrongTokenSizeIsStatus5(size: Int) {
        let result = self.malformed(
            self.framed([(1, [UInt8](repeating: 1, count: size)), (2, Fixtures.hello), (3, self.id)])
        )
        #expect(result == MalformedFrame(status: .invalidTokenSize, identifier: 42, command: .framed))
    }

    @Test func missingPayloadIsStatus4() {
        let result = self.malformed(self.framed([(1, Fixtures.token.bytes), (3, self.id)]))
        #expect(result == MalformedFrame(status: .missingPayload, identifier: 42, command: .framed))
        #expect(
            self.malformed(self.framed([(1, Fixtures.token.bytes), (2, []), (3, self.id)]))?.status == .missingPayload
        )
    }

    @Test func payloadLimitsAreExactPerCommand() {
        // Command 2: 2048 passes, 2049 is status 7.
        var atLimit = self.frame(.framed, payload: [UInt8](repeating: 0x20, count: 2048))
        guard case .notification? = FrameDecoder().decode(&atLimit) else {
            Issue.record("2048 bytes must pass")
            return
        }
        let over = self.frame(.framed, payload: [UInt8](repeating: 0x20, count: 2049)).readableArray
        #expect(
            self.malformed(over)
                == MalformedFrame(status: .invalidPayloadSize, identifier: Fixtures.identifier, command: .framed)
        )

        // Commands 0 and 1: 256 passes, 257 is status 7.
        for command in [FrameCommand.simple, .enhanced] {
            var legacy = self.frame(command, payload: [UInt8](repeating: 0x20, count: 256))
            guard case .notification? = FrameDecoder().decode(&legacy) else {
                Issue.record("256 bytes must pass for \(command)")
                return
            }
            let legacyOver = self.frame(command, payload: [UInt8](repeating: 0x20, count: 257)).readableArray
            #expect(self.malformed(legacyOver)?.status == .invalidPayloadSize)
        }
    }

    @Test func malformedItemsAreProcessingErrors() {
        let token = Fixtures.token.bytes
        let cases: [[UInt8]] = [
            self.framed([(1, token), (2, Fixtures.hello), (3, [0, 0, 42])]),  // identifier of 3 bytes
            self.framed([(1, token), (2, Fixtures.hello), (4, [0, 0])]),  // expiry of 2 bytes
            self.framed([(1, token), (2, Fixtures.hello), (5, [10, 10])]),  // priority of 2 bytes
            self.framed([(1, token), (2, Fixtures.hello), (9, [1])]),  // unknown item
            self.framed([(1, token), (1, token), (2, Fixtures.hello)]),  // repeated item
            [2, 0, 0, 0, 2, 1, 0],  // an item header cut off by the frame length
            [2, 0, 0, 0, 3, 1, 0, 32],  // item data longer than the frame
        ]
        for bytes in cases {
            #expect(self.malformed(bytes)?.status == .processingError, "\(bytes.prefix(12))")
        }
        let badPriority = self.frame(.framed, priority: 7).readableArray
        #expect(
            self.malformed(badPriority)
                == MalformedFrame(status: .processingError, identifier: Fixtures.identifier, command: .framed)
        )
    }

    @Test func legacyMalformationsKeepTheirIdentifier() {
        // command 1 | id 7 | expiry 0 | token length 0 | payload length 2 | "{}"
        let missingToken: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2] + Array("{}".utf8)
        #expect(
            self.malformed(missingToken)
                == MalformedFrame(status: .missingDeviceToken, identifier: 7, command: .enhanced)
        )
        let shortToken: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 2, 0xAB, 0xCD, 0, 2] + Array("{}".utf8)
        #expect(self.malformed(shortToken)?.status == .invalidTokenSize)
        let noPayload: [UInt8] = [0, 0, 32] + Fixtures.token.bytes + [0, 0]
        #expect(self.malformed(noPayload) == MalformedFrame(status: .missingPayload, identifier: 0, command: .simple))
    }

    @Test func unknownCommandAndHugeFramesAreRefusedWithoutWaiting() {
        #expect(self.malformed([9, 1, 2, 3]) == MalformedFrame(status: .processingError, identifier: 0, command: nil))
        #expect(self.malformed([2, 0x7f, 0xff, 0xff, 0xff])?.status == .processingError)
    }

    @Test func configurableLimits() {
        let decoder = FrameDecoder(legacyPayloadLimit: 2048, framedPayloadLimit: 100)
        var legacy = self.frame(.enhanced, payload: [UInt8](repeating: 0x20, count: 1000))
        guard case .notification? = decoder.decode(&legacy) else {
            Issue.record("a raised legacy limit must admit 1000 bytes")
            return
        }
        let framed = self.frame(.framed, payload: [UInt8](repeating: 0x20, count: 101)).readableArray
        #expect(self.malformed(framed, decoder: decoder)?.status == .invalidPayloadSize)
    }
}
