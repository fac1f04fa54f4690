#if canImport(Glibc)
import SalvoRows
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A first-in, first-out ring of plain values, bounded, over an anonymous mapping whose pages go back to the kernel as
/// the head passes them (in strides of 1 MiB, one `madvise` a stride).
///
/// Written by hand because `Deque` keeps every page it has touched: a sent window reserved for 3 M rows (48 MB) was
/// resident whole once 3 M rows had passed through it, whatever was in flight, so a 10 M-row send held 96 MB of
/// windows at any rate. Here what is resident follows what is in flight (plus a stride), and the storage never moves:
/// no copy while it fills, unlike a `Deque` left to grow.
struct ReleasingRing<Element: BitwiseCopyable> {
    /// The mapping: `capacity` elements, unmapped when the last ring using it goes.
    final class Storage {
        let base: UnsafeMutablePointer<Element>
        let capacity: Int
        /// Bytes mapped (whole pages).
        let bytes: Int
        static var pageSize: Int { Int(sysconf(Int32(_SC_PAGESIZE))) }

        init(capacity: Int) {
            let page = Self.pageSize
            self.capacity = capacity
            self.bytes = (capacity * MemoryLayout<Element>.stride + page - 1) / page * page
            let mapped = mmap(
                nil,
                self.bytes,
                PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1,
                0
            )
            guard let mapped, mapped != MAP_FAILED else {
                fatalError("cannot map \(self.bytes) bytes for \(capacity) entries: errno \(errno)")
            }
            self.base = mapped.bindMemory(to: Element.self, capacity: capacity)
        }

        deinit { munmap(UnsafeMutableRawPointer(self.base), self.bytes) }

        /// Hands back to the kernel the whole pages within elements `range` (they read as zero when next touched).
        func release(_ range: Range<Int>) {
            let page = Self.pageSize
            let size = MemoryLayout<Element>.stride
            let low = (range.lowerBound * size + page - 1) / page * page
            // The last element's page is whole in the mapping, so the ring's end releases up to the mapping's end.
            let high = range.upperBound == self.capacity ? self.bytes : range.upperBound * size / page * page
            guard high > low else { return }
            _ = madvise(UnsafeMutableRawPointer(self.base) + low, high - low, MADV_DONTNEED)
        }
    }

    /// Pages of the mapping in memory now (`mincore`): what the ring costs.
    var residentPages: Int {
        var vector = [UInt8](repeating: 0, count: self.storage.bytes / Storage.pageSize)
        let result = vector.withUnsafeMutableBufferPointer { pointer in
            mincore(UnsafeMutableRawPointer(self.storage.base), self.storage.bytes, pointer.baseAddress)
        }
        precondition(result == 0, "mincore: errno \(errno)")
        return vector.reduce(0) { $0 + Int($1 & 1) }
    }

    /// Bytes of one page.
    static var pageSize: Int { Storage.pageSize }

    private var storage: Storage
    /// Where the first element is.
    private var start = 0
    private(set) var count = 0
    /// Elements a stride holds: a power of two (a mask finds a stride's end), 1 MiB of 16-byte elements. A stride whose
    /// edges fall inside pages keeps those pages until the ring is emptied.
    private let stride: Int
    /// Something was written since the whole mapping was last released.
    private var touched = false

    init(capacity: Int) {
        precondition(capacity > 0, "a ring holds at least one element")
        self.storage = Storage(capacity: capacity)
        let fits = max(1, (1 << 20) / MemoryLayout<Element>.stride)
        self.stride = 1 << (Int.bitWidth - 1 - fits.leadingZeroBitCount)
    }

    var capacity: Int { self.storage.capacity }
    var isEmpty: Bool { self.count == 0 }
    var first: Element? { self.count == 0 ? nil : self.storage.base[self.start] }

    subscript(index: Int) -> Element {
        precondition(index >= 0 && index < self.count, "index \(index) outside a ring of \(self.count)")
        return self.storage.base[self.slot(index)]
    }

    private func slot(_ index: Int) -> Int {
        let slot = self.start + index
        return slot < self.storage.capacity ? slot : slot - self.storage.capacity
    }

    mutating func append(_ element: Element) {
        precondition(self.count < self.storage.capacity, "the ring is full (\(self.storage.capacity))")
        self.makeUnique()
        self.storage.base[self.slot(self.count)] = element
        self.count += 1
        self.touched = true
    }

    @discardableResult
    mutating func removeFirst() -> Element {
        precondition(self.count > 0, "removeFirst on an empty ring")
        // Reading and moving the head leave the storage as it is: only a release (below) needs it unshared.
        let element = self.storage.base[self.start]
        self.start += 1
        self.count -= 1
        if self.start & (self.stride - 1) == 0 || self.start == self.storage.capacity {
            let end = self.start
            if self.start == self.storage.capacity { self.start = 0 }
            self.releaseBehind(end)
        }
        return element
    }

    /// Empties the ring and hands every page back (one call: a reconnect, not a row).
    mutating func removeAll() {
        self.start = 0
        self.count = 0
        if !isKnownUniquelyReferenced(&self.storage) {
            self.storage = Storage(capacity: self.storage.capacity)
        } else if self.touched {
            self.storage.release(0..<self.storage.capacity)
        }
        self.touched = false
    }

    /// The head has just left the stride that ends at `end`: its pages go back, unless the elements still held wrap
    /// around into it (a ring nearly full, whose every page is in use anyway). A ring that shares its storage with a
    /// copy takes storage of its own instead, which holds its elements alone.
    private mutating func releaseBehind(_ end: Int) {
        guard isKnownUniquelyReferenced(&self.storage) else {
            self.makeUnique()
            return
        }
        let strideStart = (end - 1) / self.stride * self.stride
        guard self.count <= self.storage.capacity - (end - strideStart) else { return }
        self.storage.release(strideStart..<end)
    }

    /// Copy on write: a ring copied and then changed gets storage of its own.
    private mutating func makeUnique() {
        guard !isKnownUniquelyReferenced(&self.storage) else { return }
        let copy = Storage(capacity: self.storage.capacity)
        for index in 0..<self.count { copy.base[index] = self.storage.base[self.slot(index)] }
        self.storage = copy
        self.start = 0
    }
}
