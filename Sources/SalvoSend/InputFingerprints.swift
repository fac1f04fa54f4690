import APNSWire
import Crypto
import Dispatch
import Foundation
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// What a job's journal knows its input files by: their sizes, the XXH64 of their 8 MiB pieces
/// (`JournalManifest.Input.xxh64Pieces`, what a new job records), and for journals of earlier builds their SHA-256 or
/// whole-file XXH64; with a new job's, the line ends that size its state file. Reads the files (their spools, for
/// inputs named otherwise) and decides nothing: the journal compares (`JournalManifest.decide`).
public enum InputFingerprints {
    /// The input files with their sizes and fingerprints: XXH64 of their pieces (`JournalManifest.Input.xxh64Pieces`,
    /// what a new job records); with `sha256` their SHA-256 and with `whole` the XXH64 of each whole file too (what
    /// journals of earlier builds recorded).
    public static func fingerprint(
        _ files: [String],
        spools: InputSpools = InputSpools(),
        sha256: Bool = false,
        whole: Bool = false
    ) throws(JobError) -> [JournalManifest.Input] {
        try Self.addingWholeFingerprints(
            to: Self.scan(files, spools: spools, countLines: false).inputs,
            spools: spools,
            sha256: sha256,
            whole: whole
        )
    }

    /// `inputs` (as `scan` fingerprinted them) with their files' SHA-256 (`sha256`) and whole-file XXH64 (`whole`) as
    /// well: a second read of each file, one thread, for the manifest of a journal an earlier build made.
    static func addingWholeFingerprints(
        to inputs: [JournalManifest.Input],
        spools: InputSpools,
        sha256: Bool,
        whole: Bool
    ) throws(JobError) -> [JournalManifest.Input] {
        guard sha256 || whole else { return inputs }
        let wholeFiles = try Self.wholeFingerprints(inputs.map(\.path), spools: spools, sha256: sha256)
        var inputs = inputs
        for index in inputs.indices {
            inputs[index].sha256 = wholeFiles[index].sha256
            if whole { inputs[index].xxh64 = wholeFiles[index].xxh64 }
        }
        return inputs
    }

    /// The input files with their sizes, their XXH64 and (with `sha256`) their SHA-256, each file read whole in order
    /// by one thread: the fingerprints journals of earlier builds recorded.
    ///
    /// SHA-256, when asked for, runs straight over the read buffer (swift-crypto: BoringSSL, with the CPU's SHA
    /// extensions where it has them); XXH64 (`XXH64`) in the same pass.
    static func wholeFingerprints(
        _ files: [String],
        spools: InputSpools,
        sha256: Bool = false
    ) throws(JobError) -> [JournalManifest.Input] {
        var inputs: [JournalManifest.Input] = []
        for path in files {
            var hash = sha256 ? SHA256() : nil
            var fast = XXH64()
            let bytes = try Self.read(path, spools: spools) { piece in
                hash?.update(bufferPointer: piece)
                fast.update(piece)
            }
            inputs.append(
                JournalManifest.Input(
                    path: path,
                    bytes: bytes,
                    sha256: hash.map { Hex.string($0.finalize()) } ?? "",
                    xxh64: fast.hexDigest
                )
            )
        }
        return inputs
    }

    /// The size of the pieces whose digests `xxh64Pieces` hashes: part of what a recorded fingerprint means, so never
    /// to change; also what a scan reads on each core at a time.
    public static let fingerprintPiece = 8 << 20

    /// The input files with their sizes and fingerprints (`JournalManifest.Input.xxh64Pieces`) and, with `countLines`,
    /// per file a bound on the line numbers its rows can have (its line ends plus two: one more than the last line's
    /// number); without it, `lineCounts` is empty. One read of each file, its pieces on every core at once: nothing
    /// else runs yet (a new job waits for its line ends, which size its state file, a resumed one for the
    /// fingerprints), and a fingerprint read beside the sending took CPU the send and the gateway needed on the same
    /// cores (4 % of a 10 M-row job's time against 2 % in this read).
    static func scan(
        _ files: [String],
        spools: InputSpools = InputSpools(),
        countLines: Bool = true
    ) throws(JobError) -> (inputs: [JournalManifest.Input], lineCounts: [Int]) {
        var inputs: [JournalManifest.Input] = []
        var lineCounts: [Int] = []
        for path in files {
            let scanned = try Self.withDescriptor(path, spools: spools) {
                descriptor,
                size throws(JobError) -> Scanned in
                let piece = Self.fingerprintPiece
                let pieces = (size + piece - 1) / piece
                let slots = UnsafeMutableBufferPointer<Scanned>.allocate(capacity: max(pieces, 1))
                let errors = UnsafeMutableBufferPointer<JobError?>.allocate(capacity: max(pieces, 1))
                _ = slots.initialize(from: repeatElement(Scanned(), count: slots.count))
                _ = errors.initialize(from: repeatElement(nil, count: errors.count))
                defer {
                    slots.deinitialize().deallocate()
                    errors.deinitialize().deallocate()
                }
                // Each iteration reads its own piece into its own buffer and writes its own slots.
                nonisolated(unsafe) let results = slots
                nonisolated(unsafe) let failures = errors
                DispatchQueue.concurrentPerform(iterations: pieces) { index in
                    let start = index * piece
                    do throws(JobError) {
                        results[index] = try Self.scanPiece(
                            descriptor,
                            path,
                            from: start,
                            to: min(size, start + piece),
                            countLines: countLines
                        )
                    } catch {
                        failures[index] = error
                    }
                }
                if let failure = errors.prefix(pieces).lazy.compactMap({ $0 }).first { throw failure }
                var whole = Scanned()
                for result in slots.prefix(pieces) {
                    whole.bytes += result.bytes
                    whole.lineEnds += result.lineEnds
                }
                whole.digest = XXH64.ofPieces(slots.prefix(pieces).lazy.map(\.digest))
                return whole
            }
            inputs.append(
                JournalManifest.Input(
                    path: path,
                    bytes: scanned.bytes,
                    sha256: "",
                    xxh64Pieces: XXH64.hex(scanned.digest)
                )
            )
            if countLines { lineCounts.append(scanned.lineEnds + 2) }
        }
        return (inputs, lineCounts)
    }

    /// What a scan found in a piece of a file, or in the whole of it.
    private struct Scanned {
        var bytes = 0
        var lineEnds = 0
        /// The piece's XXH64; the whole file's `xxh64Pieces`.
        var digest: UInt64 = 0
    }

    /// Bytes `start..<end` of an open file, read in blocks into a buffer of this call's: their XXH64 and (with
    /// `countLines`) their line ends.
    private static func scanPiece(
        _ descriptor: Int32,
        _ path: String,
        from start: Int,
        to end: Int,
        countLines: Bool
    ) throws(JobError) -> Scanned {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.block, alignment: 64)
        defer { buffer.deallocate() }
        var lines = LineEnds()
        var hash = XXH64()
        if countLines && start > 0 {
            // Whether the byte before the piece is a CR (counted there; an LF first here completes it).
            let before = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<1])
            lines.afterCarriageReturn =
                try Self.readFully(descriptor, path, into: before, at: start - 1) == 1
                && before[0] == 0x0d
        }
        var offset = start
        while offset < end {
            let read = try Self.readFully(
                descriptor,
                path,
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(Self.block, end - offset)]),
                at: offset
            )
            guard read > 0 else { break }  // the file is shorter than it was: the bound holds for what is there
            let block = UnsafeRawBufferPointer(rebasing: buffer[0..<read])
            if countLines { lines.count(block) }
            hash.update(block)
            offset += read
        }
        return Scanned(bytes: offset - start, lineEnds: lines.count, digest: hash.finalize())
    }

    /// Line ends counted over a file read in pieces.
    private struct LineEnds {
        var count = 0
        var afterCarriageReturn = false

        /// The file's rows' line numbers are below this: its line ends plus two.
        var bound: Int { self.count + 2 }

        mutating func count(_ piece: UnsafeRawBufferPointer) {
            self.count += InputFingerprints.lineEnds(piece, afterCarriageReturn: self.afterCarriageReturn)
            self.afterCarriageReturn = piece[piece.count - 1] == 0x0d
        }
    }

    /// The size of the blocks a file is read in, into a buffer that stays in the processor's cache.
    private static let block = 256 << 10

    /// Reads `path` in blocks of 256 KiB into one buffer and hands them to `body` in order; returns the bytes read.
    ///
    /// `pread(2)` into a buffer rather than a mapping of the file: mapping a 650 MB file from the page cache, a piece at
    /// a time, and releasing each piece (so that it does not count as the process's memory) took 0.10 s of which
    /// 0.07 s in the kernel, reading it into a 256 KiB buffer 0.05 s, on this project's machine.
    private static func read(
        _ path: String,
        spools: InputSpools,
        _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(JobError) -> Int {
        try Self.withDescriptor(path, spools: spools) { descriptor, _ throws(JobError) -> Int in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.block, alignment: 64)
            defer { buffer.deallocate() }
            var offset = 0
            while true {
                let read = try Self.readFully(descriptor, path, into: buffer, at: offset)
                guard read > 0 else { return offset }
                body(UnsafeRawBufferPointer(rebasing: buffer[0..<read]))
                offset += read
            }
        }
    }

    /// Opens `path` (its spool, if `spools` has one) and calls `body` with its descriptor and size.
    private static func withDescriptor<Result>(
        _ path: String,
        spools: InputSpools,
        _ body: (Int32, Int) throws(JobError) -> Result
    ) throws(JobError) -> Result {
        let descriptor = open(spools.path(of: path), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw JobError(.input, "\(path): cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw JobError(.input, "\(path): cannot read: \(String(cString: strerror(errno)))")
        }
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
        return try body(descriptor, Int(status.st_size))
    }

    /// Reads from `offset` until `buffer` is full or the file ends; returns the bytes read.
    private static func readFully(
        _ descriptor: Int32,
        _ path: String,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) throws(JobError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let count = pread(descriptor, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset + filled))
            if count < 0 {
                if errno == EINTR { continue }
                throw JobError(.input, "\(path): cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            filled += count
        }
        return filled
    }

    /// The line ends in `bytes` as `CSVReader` counts them: each LF, each CRLF once, each bare CR; eight bytes at a
    /// time.
    ///
    /// - Parameter afterCarriageReturn: the byte before `bytes` (a file read in pieces) was a CR, already counted:
    ///   an LF first completes that CRLF and is not counted again.
    static func lineEnds(_ bytes: UnsafeRawBufferPointer, afterCarriageReturn: Bool = false) -> Int {
        // Most token files end their lines with LF alone: a piece with no CR needs no pairing.
        if let lineFeeds = Self.lineFeedsUnlessCarriageReturns(bytes) {
            return lineFeeds - (afterCarriageReturn && bytes.first == 0x0a ? 1 : 0)
        }
        return Self.lineEndsWithCarriageReturns(bytes, afterCarriageReturn: afterCarriageReturn)
    }

    /// The LFs in `bytes`, or nil when it holds a CR; sixteen bytes at a time, LFs counted and CRs looked for in the
    /// same pass (a new job waits for this count).
    ///
    /// `SIMD16<UInt8>` lanes: each step compares sixteen bytes with LF and with CR and adds the LF matches to sixteen
    /// byte counters, summed every 255 steps before one can overflow. About five times the speed of the eight-bytes-a-
    /// word count it replaced, which with a `memchr` for CRs first read the memory twice (0.13 s against 0.025 s for a
    /// 650 MB file in the page cache, one thread, pages already mapped).
    private static func lineFeedsUnlessCarriageReturns(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let vectors = bytes.count / 16
        let lineFeed = SIMD16<UInt8>(repeating: 0x0a)
        let carriageReturn = SIMD16<UInt8>(repeating: 0x0d)
        let one = SIMD16<UInt8>(repeating: 1)
        var carriageReturns = SIMD16<UInt8>(repeating: 0)
        var count = 0
        var index = 0
        while index < vectors {
            var counters = SIMD16<UInt8>(repeating: 0)
            let end = min(vectors, index &+ 255)
            while index < end {
                let vector = bytes.loadUnaligned(fromByteOffset: index &* 16, as: SIMD16<UInt8>.self)
                counters &+= one.replacing(with: 0, where: vector .!= lineFeed)
                carriageReturns |= one.replacing(with: 0, where: vector .!= carriageReturn)
                index &+= 1
            }
            for lane in 0..<16 { count &+= Int(counters[lane]) }
        }
        var sawCarriageReturn = false
        for lane in 0..<16 where carriageReturns[lane] != 0 { sawCarriageReturn = true }
        for offset in (vectors * 16)..<bytes.count {
            if bytes[offset] == 0x0a { count += 1 }
            if bytes[offset] == 0x0d { sawCarriageReturn = true }
        }
        return sawCarriageReturn ? nil : count
    }

    /// `lineEnds` for a piece that holds CRs: eight bytes at a time, CRLF pairs counted once.
    private static func lineEndsWithCarriageReturns(
        _ bytes: UnsafeRawBufferPointer,
        afterCarriageReturn: Bool
    ) -> Int {
        var count = 0
        var index = 0
        var carriageReturnBefore = afterCarriageReturn
        let words = bytes.count / 8
        let ones: UInt64 = 0x0101_0101_0101_0101
        let lows: UInt64 = 0x7f7f_7f7f_7f7f_7f7f
        // The high bit of each byte of `word` that is zero (exact: no false positives).
        @inline(__always) func zeroBytes(_ word: UInt64) -> UInt64 { ~(((word & lows) &+ lows) | word | lows) }
        while index < words {
            let word = bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)
            let lineFeeds = zeroBytes(word ^ (ones &* 0x0a))
            let carriageReturns = zeroBytes(word ^ (ones &* 0x0d))
            // A CR followed by an LF, in this word (the CR's bit moved up one byte) or across the words.
            let pairs = (carriageReturns << 8) & lineFeeds
            let pairBefore = carriageReturnBefore && lineFeeds & 0x80 != 0 ? 1 : 0
            count += lineFeeds.nonzeroBitCount + carriageReturns.nonzeroBitCount - pairs.nonzeroBitCount - pairBefore
            carriageReturnBefore = carriageReturns >> 63 != 0
            index += 1
        }
        for offset in (words * 8)..<bytes.count {
            let byte = bytes[offset]
            if byte == 0x0d {
                count += 1
            } else if byte == 0x0a && !carriageReturnBefore {
                count += 1
            }
            carriageReturnBefore = byte == 0x0d
        }
        return count
    }

    /// XXH64 of `bytes`, 16 hex digits (an input's fingerprint in a new job's manifest).
    public static func xxh64(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { XXH64.hex($0) }
    }

    /// `JournalManifest.Input.xxh64Pieces` of a file holding `bytes`, hashed in order on one thread.
    public static func xxh64Pieces(_ bytes: [UInt8]) -> String {
        let digests = bytes.withUnsafeBytes { all in
            stride(from: 0, to: all.count, by: Self.fingerprintPiece).map { start in
                var piece = XXH64()
                piece.update(
                    UnsafeRawBufferPointer(rebasing: all[start..<min(all.count, start + Self.fingerprintPiece)])
                )
                return piece.finalize()
            }
        }
        return XXH64.hex(XXH64.ofPieces(digests))
    }

    /// The input files' sizes and fingerprints and (for a new job) line ends, read on a thread of their own from the
    /// moment it is made, beside the job's opening of its input: one read of each file, its pieces on every core
    /// (`scan`: the line ends size a new job's state file), then, for the journal of an earlier build, the whole-file
    /// fingerprints its manifest recorded (`addingWholeFingerprints`: SHA-256, or XXH64 of the whole file).
    final class Reading: @unchecked Sendable {
        private let counted = DispatchSemaphore(value: 0)
        private let done = DispatchSemaphore(value: 0)
        // Each written by the reading thread before its semaphore is signalled, read after waiting on it.
        private var lineCountsResult: Result<[Int], JobError> = .success([])
        private var result: Result<[JournalManifest.Input], JobError> = .success([])

        /// Starts reading `files`: their line ends are counted with `countLines` (a new job's; a resumed job's state
        /// file is sized already); with `sha256` and `whole`, the whole files' SHA-256 and XXH64 are read after.
        init(
            _ files: [String],
            spools: InputSpools,
            countLines: Bool = true,
            sha256: Bool = false,
            whole: Bool = false
        ) {
            let thread = Thread { [self] in
                let scanned: [JournalManifest.Input]
                do throws(JobError) {
                    let (inputs, lineCounts) = try InputFingerprints.scan(files, spools: spools, countLines: countLines)
                    self.lineCountsResult = .success(lineCounts)
                    scanned = inputs
                } catch {
                    self.lineCountsResult = .failure(error)
                    self.result = .failure(error)
                    self.counted.signal()
                    self.done.signal()
                    return
                }
                self.counted.signal()
                do throws(JobError) {
                    self.result = .success(
                        try InputFingerprints.addingWholeFingerprints(
                            to: scanned,
                            spools: spools,
                            sha256: sha256,
                            whole: whole
                        )
                    )
                } catch {
                    self.result = .failure(error)
                }
                self.done.signal()
            }
            thread.start()
        }

        /// Waits for the fingerprints.
        func value() throws(JobError) -> [JournalManifest.Input] {
            self.done.wait()
            self.done.signal()
            return try self.result.get()
        }

        /// Waits for the line ends, and returns per file a bound on its rows' line numbers (the journal's size).
        func lineCounts() throws(JobError) -> [Int] {
            self.counted.wait()
            self.counted.signal()
            return try self.lineCountsResult.get()
        }
    }
}
