import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// Inputs read from the spools their request names (`InputSpools`), not from anything the process holds: two sources
/// in one process read `-` each from its own spool, and every message names the input, not the spool.
@Suite(.tags(.pure), .runs(.pure)) struct InputSpoolsTests {
    static func spools(_ name: String, _ path: String) -> InputSpools {
        var spools = InputSpools()
        spools.read(name, from: path)
        return spools
    }

    @Test func aNameWithoutASpoolIsItsOwnFile() {
        let spools = Self.spools("-", "/spool")
        #expect(spools.path(of: "-") == "/spool")
        #expect(spools.path(of: "tokens.csv") == "tokens.csv")
        #expect(spools.growing(of: "-") == nil)
        #expect(InputSpools().isEmpty && !spools.isEmpty)
    }

    @Test func twoSourcesInOneProcessReadStandardInputFromTheirOwnSpools() throws {
        let first = try temporaryFile("token\n\(hex(1))\n\(hex(2))\n")
        let second = try temporaryFile("token\n\(hex(3))\n")
        let one = TokenSource(files: ["-"], spools: Self.spools("-", first))
        let other = TokenSource(files: ["-"], spools: Self.spools("-", second))
        #expect(try one.validate().validRows == 2)
        #expect(try other.validate().validRows == 1)
        #expect(try drain(one).map(\.token) == [token(1), token(2)])
        #expect(try drain(other).map(\.token) == [token(3)])
    }

    @Test func aSpoolIsNamedByItsInputInMessages() throws {
        let spool = try temporaryFile("token\nnot a token\n")
        let source = TokenSource(files: ["postgres"], spools: Self.spools("postgres", spool))
        let error = #expect(throws: InputError.self) { try source.open() }
        #expect(error?.file == "postgres", "\(error as Any)")
        #expect(error?.description.contains(spool) == false)
    }

    @Test func aMissingSpoolIsAnErrorOfItsInput() {
        let source = TokenSource(files: ["-"], spools: Self.spools("-", "/nonexistent/spool"))
        let error = #expect(throws: InputError.self) { try source.validate() }
        #expect(error?.file == "-")
    }
}
