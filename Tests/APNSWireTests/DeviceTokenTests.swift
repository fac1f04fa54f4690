import APNSWire
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct DeviceTokenTests {
    @Test func parsesLowerAndUpperCaseHex() throws {
        let lower = try DeviceToken(hex: Fixtures.tokenHex)
        let upper = try DeviceToken(hex: Fixtures.tokenHex.uppercased())
        #expect(lower == upper)
        #expect(lower.hexString == Fixtures.tokenHex)
        #expect(lower.bytes.first == 0x74)
        #expect(lower.bytes.last == 0xad)
    }

    @Test func acceptsApplesDescriptionForm() throws {
        let described = "<740f4707 bebcf74f 9b7c25d4 8e335894 5f6aa01d a5ddb387 462c7eaf 61bb78ad>"
        #expect(try DeviceToken(hex: described) == Fixtures.token)
        #expect(try DeviceToken(hex: "  \(Fixtures.tokenHex)  ") == Fixtures.token)
    }

    @Test func rawBytesRoundTrip() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 & 0xff) }
        let token = try DeviceToken(bytes: bytes)
        #expect(token.bytes == bytes)
        #expect(try DeviceToken(hex: token.hexString) == token)
    }

    @Test func namesTheColumnOfABadCharacter() {
        var hex = Array(Fixtures.tokenHex)
        hex[16] = "g"
        #expect {
            try DeviceToken(hex: String(hex))
        } throws: { error in
            let error = error as! DeviceTokenError
            return error.code == .invalidCharacter && error.column == 17
                && error.description.contains("'g' at column 17")
        }
    }

    @Test(arguments: [62, 63, 65, 66, 0])
    func givesTheActualLength(digits: Int) {
        let hex = String(repeating: "a", count: digits)
        #expect {
            try DeviceToken(hex: hex)
        } throws: { error in
            let error = error as! DeviceTokenError
            return error.code == .wrongLength && error.found == digits
                && error.description == "a token has 64 hex digits; this one has \(digits)"
        }
    }

    @Test func refusesWrongByteCounts() {
        #expect(throws: DeviceTokenError.self) { try DeviceToken(bytes: [UInt8](repeating: 1, count: 31)) }
        #expect(throws: DeviceTokenError.self) { try DeviceToken(bytes: [UInt8](repeating: 1, count: 33)) }
    }

    @Test func refusesAnUnclosedBracket() {
        #expect {
            try DeviceToken(hex: "<" + Fixtures.tokenHex)
        } throws: { error in
            (error as! DeviceTokenError).code == .unbalancedBracket
        }
    }

    @Test func equalTokensHashAlike() throws {
        let a = try DeviceToken(hex: Fixtures.tokenHex)
        let b = try DeviceToken(bytes: a.bytes)
        var other = a.bytes
        other[31] ^= 1
        #expect(Set([a, b]).count == 1)
        #expect(try DeviceToken(bytes: other) != a)
    }
}
