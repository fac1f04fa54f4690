import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSend

/// The journal's checkpoint file and the input's fingerprints: a checkpoint written by the sync is the one a later
/// run loads, only for its own job; a new job drops it; the fingerprints and line ends of a file read in pieces, on
/// every core, are the whole file's.
@Suite(.tags(.network), .runs(.network)) struct JournalCheckpointTests {
    private func folder() throws -> String {
        let path = TestScratch.root.appendingPathComponent("salvo-jcp-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private static let manifest = JournalManifest(
        inputs: [JournalManifest.Input(path: "t.csv", bytes: 10, sha256: String(repeating: "a", count: 64))],
        settings: [:],
        lineCounts: [5]
    )

    @Test func theSyncWritesTheCheckpointAndOnlyItsJobLoadsIt() throws {
        let directory = try self.folder() + "/journal"
        let journal = try JobJournal.start(directory, manifest: Self.manifest)
        let point = InputCheckpoint(file: 0, offset: 40, line: 3, rows: 2, validRows: 2, passesUncertain: false)
        #expect(JobJournal.loadCheckpoint(directory, manifest: Self.manifest) == nil, "none before a sync")
        journal.startSyncing(checkpoint: { point })
        journal.stopSyncing()
        #expect(JobJournal.loadCheckpoint(directory, manifest: Self.manifest) == point)
        var other = Self.manifest
        other.inputs[0].sha256 = String(repeating: "b", count: 64)
        #expect(JobJournal.loadCheckpoint(directory, manifest: other) == nil, "another job's checkpoint")
        journal.discardCheckpoint()
        #expect(JobJournal.loadCheckpoint(directory, manifest: Self.manifest) == nil)

        journal.startSyncing(checkpoint: { point })
        journal.stopSyncing()
        _ = try JobJournal.start(directory, manifest: Self.manifest)
        #expect(JobJournal.loadCheckpoint(directory, manifest: Self.manifest) == nil, "a new job starts at the top")
    }

    @Test func aFileReadInPiecesHashesAndCountsAsAWhole() throws {
        // Over one 8 MiB piece, with a CR ending the first piece and an LF starting the second.
        var bytes = [UInt8](repeating: UInt8(ascii: "x"), count: (8 << 20) + 4099)
        for index in stride(from: 70, to: bytes.count, by: 71) { bytes[index] = 0x0a }
        for index in stride(from: 333, to: bytes.count, by: 1001) { bytes[index] = 0x0d }
        bytes[(8 << 20) - 1] = 0x0d
        bytes[8 << 20] = 0x0a
        let path = try self.folder() + "/big.csv"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (inputs, lineCounts) = try InputFingerprints.scan([path])
        // The pieces' fingerprint as its definition composes it: XXH64 of each 8 MiB piece, little-endian, hashed
        // again; whatever the blocks and cores the file was read with.
        var digests: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: 8 << 20) {
            let piece = try #require(
                UInt64(InputFingerprints.xxh64(Array(bytes[start..<min(bytes.count, start + (8 << 20))])), radix: 16)
            )
            withUnsafeBytes(of: piece.littleEndian) { digests.append(contentsOf: $0) }
        }
        #expect(digests.count == 16)
        let pieces = InputFingerprints.xxh64(digests)
        #expect(inputs == [JournalManifest.Input(path: path, bytes: bytes.count, sha256: "", xxh64Pieces: pieces)])
        #expect(InputFingerprints.xxh64Pieces(bytes) == pieces)
        var lineEnds = 0
        for (index, byte) in bytes.enumerated()
        where byte == 0x0d || (byte == 0x0a && (index == 0 || bytes[index - 1] != 0x0d)) {
            lineEnds += 1
        }
        #expect(lineCounts == [lineEnds + 2])
        // The whole file's fingerprints (what journals of earlier builds recorded), read in blocks, are the whole's.
        let digest = JobJournal.sha256(bytes)
        let whole = try InputFingerprints.fingerprint([path], sha256: true, whole: true)
        #expect(
            whole == [
                JournalManifest.Input(
                    path: path,
                    bytes: bytes.count,
                    sha256: digest,
                    xxh64: InputFingerprints.xxh64(bytes),
                    xxh64Pieces: pieces
                )
            ]
        )
        #expect(digest.count == 64 && digest.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        // An empty file: no pieces, the hash of nothing; no line ends.
        let empty = try self.folder() + "/empty.csv"
        try Data().write(to: URL(fileURLWithPath: empty))
        let scannedEmpty = try InputFingerprints.scan([empty])
        #expect(scannedEmpty.inputs.map(\.xxh64Pieces) == [InputFingerprints.xxh64([])])
        #expect(scannedEmpty.lineCounts == [2])
    }
}
