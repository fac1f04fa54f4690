import Foundation
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoPostgres

#if canImport(Glibc)
import Glibc
#endif

/// The text of the binary forms, without a server: times around PostgreSQL's epoch, floats, and CSV quoting.
@Suite("PostgreSQL column text", .tags(.pure), .runs(.pure)) struct PostgresColumnFormatTests {
    @Test("dates and times before and after 2000-01-01, in UTC, fractions without trailing zeros")
    func times() {
        #expect(PostgresColumnFormat.dateText(days: 0) == "1970-01-01")
        #expect(PostgresColumnFormat.dateText(days: -1) == "1969-12-31")
        #expect(PostgresColumnFormat.dateText(days: 20_415) == "2025-11-23")
        #expect(PostgresColumnFormat.timestampText(0, zoned: true) == "2000-01-01 00:00:00+00")
        #expect(PostgresColumnFormat.timestampText(-1, zoned: false) == "1999-12-31 23:59:59.999999")
        #expect(
            PostgresColumnFormat.timestampText(86_400_000_000 + 3_723_500_000, zoned: false) == "2000-01-02 01:02:03.5"
        )
        // What the CSV path reads as a registration time.
        let text = PostgresColumnFormat.timestampText(848_769_789_500_000, zoned: true)
        #expect(text == "2026-11-23 17:23:09.5+00")
        #expect(UnixTime.parse(text) == 1_795_454_589)
    }

    @Test("floats as PostgreSQL writes them")
    func floats() {
        #expect(PostgresColumnFormat.floatText(3) == "3")
        #expect(PostgresColumnFormat.floatText(-0.25) == "-0.25")
        #expect(PostgresColumnFormat.floatText(.nan) == "NaN")
        #expect(PostgresColumnFormat.floatText(-.infinity) == "-Infinity")
    }

    @Test("fields quoted only when they must be; a write that fails names the snapshot and stops the rest")
    func writer() throws {
        let folder = TestScratch.root.appendingPathComponent("postgres-writer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("writer.csv").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(descriptor >= 0)
        let writer = CSVSpoolWriter(descriptor: descriptor, name: path, capacity: 16)
        for field in ["plain", "", "a,b", "say \"hi\"", "two\nlines", String(repeating: "x", count: 40)] {
            var field = field
            field.withUTF8 { writer.field(UnsafeRawBufferPointer($0)) }
            writer.byte(UInt8(ascii: ";"))
        }
        writer.integer(-9_223_372_036_854_775_807)
        writer.flush()
        close(descriptor)
        let expected =
            #"plain;"";"a,b";"say ""hi""";"two"# + "\n" + #"lines";"# + String(repeating: "x", count: 40)
            + ";-9223372036854775807"
        #expect(try String(contentsOfFile: path, encoding: .utf8) == expected)
        #expect(writer.bytes == expected.utf8.count)
        #expect(writer.failure == nil)

        let full = open("/dev/full", O_WRONLY)
        try #require(full >= 0)
        defer { close(full) }
        let failing = CSVSpoolWriter(descriptor: full, name: "/x/postgres.csv.partial", capacity: 16)
        failing.string(String(repeating: "y", count: 100))
        failing.flush()
        #expect(failing.failure?.code == .output)
        #expect(failing.failure?.message.contains("/x/postgres.csv.partial") == true)
        #expect(failing.failure?.message.contains("No space left on device") == true)
    }
}
