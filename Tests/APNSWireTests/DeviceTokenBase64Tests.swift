import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct DeviceTokenBase64Tests {
    private func parse(_ text: String) throws(DeviceTokenError) -> DeviceToken {
        var text = text
        let result = text.withUTF8 { utf8 in
            Result { () throws(DeviceTokenError) in try DeviceToken(base64UTF8: UnsafeRawBufferPointer(utf8)) }
        }
        return try result.get()
    }

    @Test func readsWhatFoundationWrites() throws {
        for seed in 0..<64 {
            let bytes = (0..<32).map { UInt8(truncatingIfNeeded: $0 * 37 + seed * 11) }
            let token = try DeviceToken(bytes: bytes)
            let encoded = Data(bytes).base64EncodedString()
            #expect(token.base64String == encoded)
            #expect(try self.parse(encoded) == token)
            #expect(try self.parse(" " + String(encoded.dropLast()) + " ") == token, "without '=', with spaces")
            let urlSafe = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            #expect(try self.parse(urlSafe) == token)
        }
    }

    @Test func badTextIsNamed() {
        let good = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        #expect(throws: DeviceTokenError.self) { try self.parse(String(good.dropLast(2))) }
        let length = #expect(throws: DeviceTokenError.self) { try self.parse(good + "AAAA") }
        #expect(length?.code == .wrongBase64Length && length?.found == 48)
        let character = #expect(throws: DeviceTokenError.self) { try self.parse("*" + good.dropFirst()) }
        #expect(character?.code == .invalidBase64Character && character?.column == 1)
        #expect(character?.description.contains("'*'") == true)
        // Hex is not base64 of 32 bytes.
        #expect(throws: DeviceTokenError.self) { try self.parse(String(repeating: "ab", count: 32)) }
    }
}
