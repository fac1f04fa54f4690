import APNSWire
import Foundation
import NIOCore

/// The repository's `data/` folder, found from this file's path so tests run from any working directory.
enum TestData {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // APNSWireTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // repository
        .appendingPathComponent("data")

    static func text(_ path: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8)
    }

    /// Reads a golden vector: hex digits, with `#` comments and white space ignored.
    static func hexVector(_ name: String) throws -> [UInt8] {
        let digits = try text("vectors/\(name)")
            .split(separator: "\n")
            .map { line in line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0] }
            .joined()
            .filter { !$0.isWhitespace }
        precondition(digits.count % 2 == 0, "odd number of hex digits in \(name)")
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            bytes.append(UInt8(digits[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}

extension ByteBuffer {
    /// All readable bytes, as an array.
    var readableArray: [UInt8] { self.getBytes(at: self.readerIndex, length: self.readableBytes) ?? [] }
}

enum Fixtures {
    static let tokenHex = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
    static let token = try! DeviceToken(hex: tokenHex)
    static let hello: [UInt8] = Array(#"{"aps":{"alert":"Hello"}}"#.utf8)
    static let identifier: UInt32 = 0x0102_0304
    static let expiry: UInt32 = 1_700_000_000
}
