import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

@Suite(.tags(.pure), .runs(.pure)) struct ConnectPacerTests {
    @Test func everyConnectOfAJobTakesItsOwnSlotAtTheFloorApart() {
        let pacer = ConnectPacer(floor: 50, ceiling: 1_000, now: 0)
        // Two shards asking at the same moment are spaced by the job's floor, not each by its own.
        #expect(pacer.slot(earliest: 100) == 100)
        #expect(pacer.slot(earliest: 100) == 150)
        #expect(pacer.slot(earliest: 400) == 400)
    }

    @Test func theOpeningConnectsGoTogetherAndLaterOnesAreSpaced() {
        let pacer = ConnectPacer(floor: 50, ceiling: 1_000, now: 0, opening: 3)
        // Three shards opening the job connect at once; a reconnect after them waits the floor.
        #expect(pacer.slot(earliest: 100) == 100)
        #expect(pacer.slot(earliest: 100) == 100)
        #expect(pacer.slot(earliest: 101) == 101)
        #expect(pacer.slot(earliest: 102) == 151)
        #expect(pacer.slot(earliest: 102) == 201)
    }

    @Test func aRefusalAmongTheOpeningConnectsSpacesTheRest() {
        let millisecond: UInt64 = 1_000_000
        let pacer = ConnectPacer(floor: 20 * millisecond, ceiling: 1_000 * millisecond, now: 0, opening: 4)
        #expect(pacer.slot(earliest: 100) == 100)
        pacer.refused()
        // The spacing doubled (40 ms), and the slot planned 20 ms after the first moved on by half of it.
        #expect(pacer.slot(earliest: 100) == 100 + 40 * millisecond)
        #expect(pacer.slot(earliest: 100) == 100 + 80 * millisecond)
    }

    @Test func refusalsWidenTheSpacingForTheWholeJobAndSuccessesNarrowIt() {
        let pacer = ConnectPacer(floor: 20_000_000, ceiling: 1_000_000_000, now: 0)
        pacer.refused()
        #expect(pacer.interval == 40_000_000)
        pacer.refused()
        #expect(pacer.interval == 80_000_000)
        for _ in 0..<10 { pacer.refused() }
        #expect(pacer.interval == 1_000_000_000, "never beyond the ceiling")
        for _ in 0..<100 { pacer.connected() }
        #expect(pacer.interval == 20_000_000, "back to the floor")
    }

    @Test func noSlotComesAfterTheGiveUpDeadline() {
        // Refusals stretched the spacing to 10 s and pushed the next free slot far out; the job gives up at 30 s
        // without progress. A connect the spacing would put later comes at the deadline instead, so the job ends then.
        let second: UInt64 = 1_000_000_000
        let pacer = ConnectPacer(floor: 0, ceiling: 10 * second, now: 0)
        for _ in 0..<20 { pacer.refused() }
        #expect(pacer.interval == 10 * second)
        #expect(pacer.slot(earliest: 0) > 30 * second, "without a deadline the spacing holds")
        #expect(pacer.slot(earliest: 1 * second, latest: 30 * second) == 30 * second)
        // Past the deadline, never before what was asked for.
        #expect(pacer.slot(earliest: 31 * second, latest: 30 * second) == 31 * second)
        #expect(pacer.slot(earliest: 35 * second) == 41 * second)
    }

    @Test func progressFromAnyShardIsRemembered() {
        let pacer = ConnectPacer(floor: 0, ceiling: 0, now: 5)
        #expect(pacer.lastProgressAt == 5)
        pacer.progressed(at: 90)
        pacer.progressed(at: 70)
        #expect(pacer.lastProgressAt == 90)
    }
}
