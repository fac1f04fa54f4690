import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

@Suite(.tags(.pure), .runs(.pure)) struct ReleasingRingTests {
    private struct Entry: Equatable {
        var a: Int
        var b: UInt64
    }

    @Test func keepsOrderAcrossTheWrapAndRefusesNothingWithinCapacity() {
        var ring = ReleasingRing<Entry>(capacity: 5)
        var next = 0
        var expected = 0
        // Fill and drain unevenly many times around a ring of 5.
        for round in 0..<200 {
            while ring.count < 5, next < expected + 5, next <= round * 3 + 4 {
                ring.append(Entry(a: next, b: UInt64(next) * 3))
                next += 1
            }
            #expect(ring.first == Entry(a: expected, b: UInt64(expected) * 3))
            for index in 0..<ring.count { #expect(ring[index].a == expected + index) }
            for _ in 0..<(round % 3 + 1) where !ring.isEmpty {
                #expect(ring.removeFirst().a == expected)
                expected += 1
            }
        }
        #expect(next > 400)
        ring.removeAll()
        #expect(ring.isEmpty && ring.first == nil)
        ring.append(Entry(a: 1, b: 1))
        #expect(ring[0] == Entry(a: 1, b: 1) && ring.count == 1)
    }

    @Test func aCopyChangedLaterIsIndependent() {
        var ring = ReleasingRing<Entry>(capacity: 4)
        for value in 0..<4 { ring.append(Entry(a: value, b: 0)) }
        ring.removeFirst()
        ring.append(Entry(a: 4, b: 0))  // wrapped
        var copy = ring
        copy.removeFirst()
        copy.append(Entry(a: 5, b: 0))
        #expect((0..<4).map { ring[$0].a } == [1, 2, 3, 4])
        #expect((0..<4).map { copy[$0].a } == [2, 3, 4, 5])
        ring.removeAll()
        #expect(copy.count == 4 && copy[3].a == 5)
    }

    @Test func aCopyKeepsItsRowsWhenTheOtherPassesAStride() {
        // The original moves its head past a stride while a copy still holds those rows: the copy keeps them.
        let stride = 65_536
        var ring = ReleasingRing<Entry>(capacity: 3 * stride)
        for value in 0..<(2 * stride) { ring.append(Entry(a: value, b: 1)) }
        let copy = ring
        for _ in 0..<(stride + 1) { ring.removeFirst() }
        #expect(copy.count == 2 * stride)
        #expect((0..<copy.count).allSatisfy { copy[$0] == Entry(a: $0, b: 1) })
        #expect(ring.first == Entry(a: stride + 1, b: 1))
        var emptied = copy
        emptied.removeAll()
        #expect(copy[stride - 1] == Entry(a: stride - 1, b: 1) && emptied.isEmpty)
    }

    @Test func pagesGoBackAsTheHeadPassesThemAndResidentFollowsWhatIsHeld() {
        // 16-byte entries: a stride of 1 MiB holds 65,536. A ring of 8 strides.
        let stride = 65_536
        var ring = ReleasingRing<Entry>(capacity: 8 * stride)
        let pagesPerStride = (1 << 20) / ReleasingRing<Entry>.pageSize
        #expect(ring.residentPages == 0)
        for value in 0..<(3 * stride) { ring.append(Entry(a: value, b: 0)) }
        #expect(ring.residentPages == 3 * pagesPerStride)
        // The head passes two strides: they go back; the third stays (rows in it are still held).
        for _ in 0..<(2 * stride + 10) { ring.removeFirst() }
        #expect(ring.residentPages == pagesPerStride)
        #expect(ring.first?.a == 2 * stride + 10)
        // Around the ring several times with about a stride held: resident stays near what is held, not the capacity.
        var next = 3 * stride
        var most = 0
        for _ in 0..<40 {
            for _ in 0..<(stride / 2) {
                ring.append(Entry(a: next, b: 0))
                next += 1
            }
            for _ in 0..<(stride / 2) { ring.removeFirst() }
            most = max(most, ring.residentPages)
        }
        #expect(next > 8 * stride * 2)
        #expect(most <= 3 * pagesPerStride)
        #expect(ring[0].a == next - ring.count)
        ring.removeAll()
        #expect(ring.residentPages == 0)
    }

    @Test func aRingNearlyFullKeepsThePagesItWrapsInto() {
        let stride = 65_536
        var ring = ReleasingRing<Entry>(capacity: 2 * stride)
        for value in 0..<(2 * stride) { ring.append(Entry(a: value, b: 0)) }
        // The head leaves the first stride while the tail is about to wrap into it: one row out, one in.
        for value in 0..<stride {
            #expect(ring.removeFirst().a == value)
            ring.append(Entry(a: 2 * stride + value, b: 7))
        }
        // Every row written is still readable: nothing held was released.
        for index in 0..<ring.count { #expect(ring[index] == Entry(a: stride + index, b: index < stride ? 0 : 7)) }
    }
}
