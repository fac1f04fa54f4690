import NIOCore
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.pure), .runs(.pure)) struct ConnectionGateTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    @Test func connectsPerSecondUseASlidingWindow() {
        let gate = ConnectionGate(limits: FaultPlan.ConnectionLimits(maxConnectsPerSecond: 2))
        #expect(gate.admit(address: "a", now: self.start) == nil)
        #expect(gate.admit(address: "b", now: self.start + .milliseconds(100)) == nil)
        #expect(gate.admit(address: "c", now: self.start + .milliseconds(200)) == "rate")
        #expect(gate.admit(address: "c", now: self.start + .milliseconds(1_050)) == nil)
        #expect(gate.admit(address: "c", now: self.start + .milliseconds(1_060)) == "rate")
    }

    @Test func aClientMustWaitBetweenConnectsAndRefusalsRestartTheWait() {
        let gate = ConnectionGate(limits: FaultPlan.ConnectionLimits(minIntervalPerClientMilliseconds: 500))
        #expect(gate.admit(address: "a", now: self.start) == nil)
        #expect(gate.admit(address: "b", now: self.start + .milliseconds(10)) == nil)
        #expect(gate.admit(address: "a", now: self.start + .milliseconds(400)) == "minInterval")
        #expect(gate.admit(address: "a", now: self.start + .milliseconds(600)) == "minInterval")
        #expect(gate.admit(address: "a", now: self.start + .milliseconds(1_100)) == nil)
    }

    @Test func openConnectionsAreCountedUntilReleased() {
        let gate = ConnectionGate(limits: FaultPlan.ConnectionLimits(maxOpen: 2))
        #expect(gate.admit(address: "a", now: self.start) == nil)
        #expect(gate.admit(address: "a", now: self.start) == nil)
        #expect(gate.admit(address: "a", now: self.start) == "maxOpen")
        gate.release()
        #expect(gate.admit(address: "a", now: self.start) == nil)
    }
}
