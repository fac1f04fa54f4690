import NIOCore
import NIOPosix
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Connections spread over the gateway's addresses: slot k starts at the k-th address of each family.
@Suite(.tags(.pure), .runs(.pure)) struct RotatingResolverTests {
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

    /// The lookups are awaited, not waited on: a name that does not resolve may take the resolver a while, and no
    /// thread of the concurrency pool is held meanwhile.
    @Test func aNumericHostResolvesToItselfAndAnUnknownNameFails() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let resolver = RotatingResolver(loop: loop, turn: 3)
        let v4 = try await resolver.initiateAQuery(host: "127.0.0.1", port: 443).get()
        let v6 = try await resolver.initiateAAAAQuery(host: "127.0.0.1", port: 443).get()
        #expect(v4.map(\.ipAddress) == ["127.0.0.1"] && v4.first?.port == 443)
        #expect(v6.isEmpty)
        let unknown = RotatingResolver(loop: loop, turn: 0)
        await #expect(throws: NameResolutionError.self) {
            try await unknown.initiateAQuery(host: "no-such-host.invalid", port: 443).get()
        }
    }
}
