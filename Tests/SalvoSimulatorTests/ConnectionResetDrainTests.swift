import NIOCore
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// When a planned reset may send its RST: only once the peer has acknowledged every segment sent (a RST discards
/// what the kernel still holds), or when the wait for that has reached its bound.
@Suite(.tags(.pure), .runs(.pure)) struct ConnectionResetDrainTests {
    @Test func aResetWaitsForTheAcknowledgementsWithinItsBound() {
        let bound = ConnectionResetHandler.maximumDrainWait
        #expect(ConnectionResetHandler.waitsForAcknowledgement(unacked: 3, waited: .zero))
        #expect(ConnectionResetHandler.waitsForAcknowledgement(unacked: 1, waited: bound - .nanoseconds(1)))
        // Every segment acknowledged: at once.
        #expect(!ConnectionResetHandler.waitsForAcknowledgement(unacked: 0, waited: .zero))
        // A peer that never acknowledges does not hold the reset back past the bound.
        #expect(!ConnectionResetHandler.waitsForAcknowledgement(unacked: 1, waited: bound))
        #expect(bound > .zero && bound <= .seconds(1))
    }
}
