import APNSWire
import Foundation
import NIOCore
import SalvoBenchmarkSupport
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The reference link behind `salvo-bench send`'s limit (`Benchmarks/reference`, built with `cc`): another gateway
/// that accepts everything, so it is held to the same framing as the simulator. The receiver counts every frame,
/// answers a barrier as APNs does, and names bad framing; the sender's frames are counted whole on the other side.
@Suite(.tags(.network), .runs(.network), .serialized) struct ReferenceLinkTests {
    static let certificates = CertificateFactory.sharedFolder

    static func frames(_ count: Int, barrier: UInt32?) throws -> ByteBuffer {
        let payload = try Payload(json: #"{"aps":{"alert":"Hello","badge":1}}"#)
        var buffer = ByteBuffer()
        for index in 0..<count {
            buffer.writeNotificationFrame(
                command: .framed,
                token: try DeviceToken(bytes: TestTokens.token(UInt32(index))),
                payload: payload.bytes,
                identifier: UInt32(index + 1)
            )
        }
        if let barrier { BarrierFrame.write(command: .framed, identifier: barrier, to: &buffer) }
        return buffer
    }

    @Test func limitCountsEveryFrameOfEveryConnection() throws {
        let link = try ReferenceLink.prepare()
        let limit = try link.measure(
            frames: 30_001,
            connections: 2,
            frameBytes: 161,
            certificate: Self.certificates.server,
            key: Self.certificates.serverKey
        )
        #expect(limit.receiver.frames == 30_001)
        #expect(limit.receiver.bytes == 30_001 * 161 + 2 * 12)  // and each connection's 12-byte barrier
        #expect(limit.receiver.barriers == 2)
        #expect(limit.receiver.connections == 2)
        #expect(limit.receiver.invalid == 0)
        #expect(limit.seconds > 0 && limit.framesPerSecond > 0)
    }

    @Test func receiverAnswersABarrierAsTheGatewayDoesAfterEveryEarlierFrame() async throws {
        let receiver = try ReferenceReceiver.start(
            try ReferenceLink.prepare(),
            certificate: Self.certificates.server,
            key: Self.certificates.serverKey
        )
        let outcome = try await TestClient.exchange(
            port: receiver.port,
            identity: nil,
            trusting: CertificateFactory.shared.ca.certificatePEM,
            send: try Self.frames(1000, barrier: 0xABCD_0102),
            timeout: .seconds(20)
        )
        let counts = try receiver.stop()
        #expect(!outcome.timedOut)
        #expect(outcome.received == [8, 2, 0xAB, 0xCD, 0x01, 0x02])
        #expect(counts.frames == 1000)
        #expect(counts.barriers == 1)
        #expect(counts.invalid == 0)
    }

    @Test func receiverNamesBadFramingAndAnswersNothing() async throws {
        let receiver = try ReferenceReceiver.start(
            try ReferenceLink.prepare(),
            certificate: Self.certificates.server,
            key: Self.certificates.serverKey
        )
        let good = try Self.frames(2, barrier: nil)
        let token = [UInt8](repeating: 0xAA, count: 32)
        let bad: [[UInt8]] = [
            [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0] + token,  // command 1
            [2, 0, 0, 0, 34, 1, 0, 31] + token.dropLast(),  // a 31-byte token
            [2, 0, 0, 0, 16, 3, 0, 4, 0, 0, 0, 1, 3, 0, 4, 0, 0, 0, 2, 0, 0],  // item 3 twice
            [2, 0, 0, 0, 8, 3, 0, 4, 0, 0, 0, 1],  // items that do not fill the frame length
            [2, 0, 0, 0x10, 0, 1],  // a frame length no command-2 frame has
            [2, 0, 0, 0, 11, 5, 0, 1, 10, 4, 0, 4, 0, 0, 0, 0],  // no token or payload, and not a barrier
        ]
        for frame in bad {
            var bytes = good
            bytes.writeBytes(frame)
            bytes.writeBytes([UInt8](repeating: 0, count: 64))
            let outcome = try await TestClient.exchange(
                port: receiver.port,
                identity: nil,
                trusting: CertificateFactory.shared.ca.certificatePEM,
                send: bytes,
                timeout: .seconds(20)
            )
            #expect(!outcome.timedOut, "\(frame)")
            #expect(outcome.received.isEmpty, "\(frame)")
        }
        let counts = try receiver.stop()
        #expect(counts.invalid == bad.count)
        #expect(counts.frames == 2 * bad.count)
        #expect(counts.barriers == 0)
    }

    @Test func aFolderWithoutTheSourcesIsNamed() throws {
        let folder = TestScratch.path + "/no-reference-sources"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        #expect {
            try ReferenceLink.prepare(sources: folder)
        } throws: { error in
            "\(error)".contains("\(folder) holds no reference-sender.c")
        }
    }
}
