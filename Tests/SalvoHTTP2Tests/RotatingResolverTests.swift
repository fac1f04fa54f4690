import NIOCore
import NIOPosix
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Connections spread over the gateway's addresses: slot k starts at the k-th address of each family.
@Suite(.tags(.pure), .runs(.pure), .offThePool) struct RotatingResolverTests {
    @Test func eachTurnStartsAtTheNextAddressAndKeepsTheOthersAfterIt() {
        let addresses = ["a", "b", "c"]
        #expect(RotatingResolver.rotated(addresses, by: 0) == ["a", "b", "c"])
        #expect(RotatingResolver.rotated(addresses, by: 1) == ["b", "c", "a"])
        #expect(RotatingResolver.rotated(addresses, by: 5) == ["c", "a", "b"])
        #expect(RotatingResolver.rotated(["a"], by: 7) == ["a"])
        #expect(RotatingResolver.rotated([String](), by: 3).isEmpty)
        // A turn that wrapped past Int.max still picks an address.
        #expect(RotatingResolver.rotated(addresses, by: -1).count == 3)
    }

    @Test func aNumericHostResolvesToItselfAndAnUnknownNameFails() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let resolver = RotatingResolver(loop: group.next(), turn: 3)
        let v4 = try resolver.initiateAQuery(host: "127.0.0.1", port: 443).wait()
        let v6 = try resolver.initiateAAAAQuery(host: "127.0.0.1", port: 443).wait()
        #expect(v4.map(\.ipAddress) == ["127.0.0.1"] && v4.first?.port == 443)
        #expect(v6.isEmpty)
        let unknown = RotatingResolver(loop: group.next(), turn: 0)
        #expect(throws: NameResolutionError.self) {
            try unknown.initiateAQuery(host: "no-such-host.invalid", port: 443).wait()
        }
    }
}
