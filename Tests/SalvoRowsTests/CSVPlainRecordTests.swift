import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// `CSVReader.nextPlain()`, the common record read without the general scan, must read every record it takes exactly
/// as `next()` does (fields, line, offset) and take nothing it cannot: checked against `next()` alone on texts made
/// of every kind of record, across the reader's chunk boundaries.
@Suite(.tags(.pure), .runs(.pure)) struct CSVPlainRecordTests {
    /// One record as a reader left it: its line, its offset and its fields' text and quoting.
    struct Record: Equatable, CustomStringConvertible {
        var line: Int
        var offset: Int
        var fields: [String]
        var quoted: [Bool]
        var description: String { "line \(line) @\(offset) \(fields) \(quoted)" }
    }

    /// What reading the whole file came to: its records, then the end or the error that ended it.
    struct Reading: Equatable {
        var records: [Record] = []
        var ending = "end"
        /// How many records `nextPlain()` took.
        var plain = 0
    }

    static func read(_ path: String, plainFirst: Bool) -> Reading {
        var reading = Reading()
        do {
            let reader = try CSVReader(path: path, chunkSize: 4096)
            while true {
                let line: Int
                if plainFirst, let plain = reader.nextPlain() {
                    line = plain
                    reading.plain += 1
                } else if let general = try reader.next() {
                    line = general
                } else {
                    break
                }
                reading.records.append(
                    Record(
                        line: line,
                        offset: reader.recordOffset,
                        fields: (0..<reader.fields.count).map { reader.string($0) },
                        quoted: reader.fields.map(\.quoted)
                    )
                )
            }
        } catch {
            reading.ending = "\(error)"
        }
        return reading
    }

    /// A text of `records` records drawn from every kind: plain lines of tokens and other fields, quoted fields
    /// (with commas, `""` and line breaks inside), CRLF and bare CR ends, blank lines, spaces, bytes above 0x7F,
    /// long fields, and sometimes a byte-order mark first or no line end last.
    static func text(records: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        func hexToken() -> String {
            (0..<32).map { _ in String(format: "%02x", Int(random.next() & 0xFF)) }.joined()
        }
        let fields: [() -> String] = [
            { hexToken() },
            { hexToken().uppercased() },
            { "" },
            { " \(hexToken()) " },
            { "\"\(hexToken())\"" },
            { "\"a,b\"" },
            { "\"say \"\"hi\"\"\"" },
            { "\"two\nlines\"" },
            { "\"cr\rinside\"" },
            { "français" },
            { "name-\(pick(1000))" },
            { String(repeating: "x", count: 3000 + pick(3000)) },
            { "<\(hexToken())>" },
            { "!#$%&'()*+" },
        ]
        let ends = ["\n", "\n", "\n", "\n", "\r\n", "\r"]
        var text = pick(4) == 0 ? "\u{FEFF}" : ""
        for _ in 0..<records {
            switch pick(12) {
            case 0: text += ends[pick(ends.count)]  // a blank line
            case 1, 2, 3, 4, 5: text += hexToken() + "\n"  // the common record
            default:
                let count = 1 + pick(4)
                text += (0..<count).map { _ in fields[pick(fields.count)]() }.joined(separator: ",")
                text += ends[pick(ends.count)]
            }
        }
        if pick(3) == 0 { text += hexToken() }  // a last record without a line end
        return Array(text.utf8)
    }

    @Test(arguments: 0..<24)
    func readsEveryRecordAsTheGeneralReaderDoes(seed: Int) throws {
        let bytes = Self.text(records: 400, seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        let path = try temporaryFile(String(decoding: bytes, as: UTF8.self))
        let general = Self.read(path, plainFirst: false)
        let plain = Self.read(path, plainFirst: true)
        #expect(plain.records.count == general.records.count)
        for (index, (mine, theirs)) in zip(plain.records, general.records).enumerated() where mine != theirs {
            Issue.record("record \(index): \(mine) where next() read \(theirs)")
            break
        }
        #expect(plain.ending == general.ending)
        #expect(plain.plain > 0, "the common records were read by nextPlain()")
    }

    @Test func anUnclosedQuoteIsStillTheGeneralReadersError() throws {
        let path = try temporaryFile("token\n\(hex(1))\n\"open,\(hex(2))\n\(hex(3))\n")
        let general = Self.read(path, plainFirst: false)
        let plain = Self.read(path, plainFirst: true)
        #expect(general.ending.contains("quoted field is not closed"))
        #expect(plain == Reading(records: general.records, ending: general.ending, plain: plain.plain))
    }

    @Test func takesNothingItCannotRead() throws {
        // A quote, a CR, a blank line and a last line without its end: each is left whole for next().
        let path = try temporaryFile("\(hex(1))\n\"\(hex(2))\"\n\(hex(3))\r\n\n\(hex(4))")
        let reader = try CSVReader(path: path, chunkSize: 4096)
        #expect(reader.nextPlain() == nil, "nothing is read before the first next()")
        #expect(try reader.next() == 1)
        #expect(reader.nextPlain() == nil)
        #expect(try reader.next() == 2)
        #expect(reader.fields.first?.quoted == true)
        #expect(reader.nextPlain() == nil)
        #expect(try reader.next() == 3)
        #expect(reader.nextPlain() == nil)
        #expect(try reader.next() == 5, "the blank line 4 passed over")
        #expect(reader.string(0) == hex(4))
        #expect(try reader.next() == nil)
    }

    @Test func readsTheFieldsOfAPlainLine() throws {
        let path = try temporaryFile("token,lang,name\n\(hex(1)),fr,Zoé\n\(hex(2)),,\n")
        let reader = try CSVReader(path: path, chunkSize: 4096)
        #expect(try reader.next() == 1)
        #expect(reader.nextPlain() == 2)
        #expect((0..<reader.fields.count).map { reader.string($0) } == [hex(1), "fr", "Zoé"])
        #expect(reader.recordOffset == 16)
        #expect(reader.nextPlain() == 3)
        #expect((0..<reader.fields.count).map { reader.string($0) } == [hex(2), "", ""])
        #expect(reader.nextPlain() == nil)
        #expect(try reader.next() == nil)
    }
}
