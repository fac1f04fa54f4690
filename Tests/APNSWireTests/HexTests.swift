import APNSWire
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct HexTests {
    @Test func bytesAreWrittenAsLowercasePairsAndReadBack() {
        let bytes: [UInt8] = [0x00, 0x01, 0x7f, 0x80, 0xab, 0xff]
        #expect(Hex.string(bytes) == "00017f80abff")
        #expect(Hex.string([UInt8]()) == "")
        #expect(Hex.bytes("00017f80abff") == bytes)
        #expect(Hex.bytes("") == [])
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.bytes(Hex.string(all)) == all)
    }

    @Test func anythingButLowercasePairsIsRefused() {
        #expect(Hex.bytes("abc") == nil, "odd count")
        #expect(Hex.bytes("AB") == nil, "uppercase")
        #expect(Hex.bytes("0g") == nil)
        #expect(Hex.bytes("0 ") == nil)
    }

    @Test func aDeviceTokenIsWrittenByTheSameWriter() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 & 0xff) }
        let token = try DeviceToken(bytes: bytes)
        #expect(token.hexString == Hex.string(bytes))
    }
}
