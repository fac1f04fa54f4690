import SalvoTestTraits
import Testing

@testable import SalvoIO

/// Connections spread over every address a gateway name resolves to: each picks one by its number.
@Suite(.tags(.network), .runs(.network)) struct AddressChoiceTests {
    private func text(_ address: Socket.Address) -> [UInt8] {
        withUnsafeBytes(of: address.storage) { [UInt8]($0.prefix(Int(address.length))) }
    }

    @Test func aNameResolvesToEachOfItsAddressesOnce() throws {
        let all = try Socket.Address.resolveAll(host: "localhost", port: 2195)
        #expect(!all.isEmpty)
        #expect(Set(all.map(self.text)).count == all.count, "no address twice")
    }

    @Test func theChoiceTurnsThroughTheAddresses() throws {
        let all = try Socket.Address.resolveAll(host: "localhost", port: 2195)
        for choice in [0, 1, 2, 7, -1, Int.max, Int.min] {
            let picked = try Socket.Address.resolve(host: "localhost", port: 2195, choice: choice)
            let expected = all[Int(UInt(bitPattern: choice) % UInt(all.count))]
            #expect(self.text(picked) == self.text(expected), "choice \(choice)")
        }
    }

    @Test func aNumericHostIsItsOwnOnlyAddress() throws {
        let all = try Socket.Address.resolveAll(host: "127.0.0.1", port: 2195)
        #expect(all.count == 1)
        let picked = try Socket.Address.resolve(host: "127.0.0.1", port: 2195, choice: 5)
        #expect(self.text(picked) == self.text(all[0]))
    }

    @Test func aNameThatDoesNotResolveSaysSo() {
        #expect(throws: SalvoIOError.self) {
            try Socket.Address.resolveAll(host: "no-such-host.invalid", port: 2195)
        }
    }
}
