import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoSend

/// The journal's fingerprint of an input: XXH64 as its reference computes it, whatever the pieces the file is read in.
@Suite(.tags(.pure), .runs(.pure)) struct XXH64Tests {
    /// Bytes `(7 i + 3) mod 256`: the digests below are the reference implementation's (the `xxhash` package, seed 0).
    static let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
    static let digests: [(count: Int, digest: String)] = [
        (0, "ef46db3751d8e999"), (1, "1f25c8d0bc1f4bb6"), (3, "31d2363f52e564c9"), (4, "9bb64b7d66ee9fda"),
        (7, "9a7b149959ce60d8"), (8, "dab99d95c6f90092"), (31, "a2aa5f33cc4a6119"), (32, "23c3c17ef790fd97"),
        (33, "50a7cfc7ba588784"), (63, "5e3e54b431c7493c"), (64, "0eb64b3ef6eeb01f"), (100, "a61f8d4c170fe531"),
        (1000, "5f235fa033f1a3fb"), (100_000, "953e8a6a68df79c4"),
    ]

    @Test func digestsAreTheReferences() {
        for (count, digest) in Self.digests {
            #expect(InputFingerprints.xxh64(Array(Self.bytes.prefix(count))) == digest, "\(count) bytes")
        }
        #expect(InputFingerprints.xxh64(Array("abc".utf8)) == "44bc2cf5ad770999")
    }

    @Test(arguments: [1, 5, 31, 32, 33, 4096, 65_537])
    func piecesOfAnySizeComeToTheWholesDigest(piece: Int) {
        var hash = XXH64()
        Self.bytes.withUnsafeBytes { all in
            var offset = 0
            var size = piece
            while offset < all.count {
                let end = min(all.count, offset + size)
                hash.update(UnsafeRawBufferPointer(rebasing: all[offset..<end]))
                offset = end
                size = size % 7 + piece  // pieces of several sizes
            }
        }
        #expect(hash.hexDigest == "953e8a6a68df79c4")
    }
}
