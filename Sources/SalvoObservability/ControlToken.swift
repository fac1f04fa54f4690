import APNSWire
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The secret a simulator's control endpoint asks of every request (`Authorization: Bearer <token>`): 32 random
/// bytes from the system's generator, written as 64 hex digits. `salvo simulate` makes one (or reads one from
/// `--control-token-file`) and writes it, readable by its owner only, beside its certificates as `control-token`,
/// where `salvo soak --gateway … --certificates DIR` finds it.
public struct ControlToken: Sendable, Equatable, CustomStringConvertible {
    /// The token's text, as a client sends it after `Bearer `.
    public let text: String
    private let bytes: [UInt8]

    /// The file name of the token in a simulator's certificate folder.
    public static let fileName = "control-token"

    /// The fewest characters a token read from a file may have: a short secret is a guessable one.
    public static let minimumLength = 16

    /// A token as given; refused when it is shorter than `minimumLength` or holds anything but visible ASCII (it
    /// travels in a header field).
    public init(_ text: String) throws(ControlTokenError) {
        guard text.utf8.count >= Self.minimumLength else {
            throw ControlTokenError("a control token needs at least \(Self.minimumLength) characters")
        }
        guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw ControlTokenError("a control token holds visible ASCII characters only (no spaces)")
        }
        self.text = text
        self.bytes = Array(text.utf8)
    }

    /// A new random token.
    public static func random() -> ControlToken {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0 ... .max, using: &generator) }
        return try! ControlToken(Hex.string(bytes))
    }

    /// Never the secret itself, so that it cannot reach a log by accident.
    public var description: String { "ControlToken(\(self.bytes.count) characters)" }

    /// Whether an `Authorization` field value is `Bearer <this token>` (the scheme in any case). The comparison
    /// takes the same time wherever the first difference is, so the answer's timing tells nothing of the token.
    public func admits(authorization: [String]) -> Bool {
        guard authorization.count == 1, authorization[0].prefix(7).lowercased() == "bearer " else { return false }
        return Self.constantTimeEqual(Array(authorization[0].utf8.dropFirst(7))[...], self.bytes)
    }

    /// Equal bytes, compared without an early exit: the time depends on the expected length only.
    static func constantTimeEqual(_ given: ArraySlice<UInt8>, _ expected: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: given.count ^ expected.count)
        if given.count != expected.count { difference |= 1 }
        var index = given.startIndex
        for byte in expected {
            let other = index < given.endIndex ? given[index] : ~byte
            difference |= byte ^ other
            index += 1
        }
        return difference == 0
    }

    /// Reads a token from a file: its first line, without surrounding white space.
    public static func read(from path: String) throws(ControlTokenError) -> ControlToken {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ControlTokenError("\(path): cannot be read (\(error.localizedDescription))")
        }
        let text =
            String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        do {
            return try ControlToken(text)
        } catch {
            throw ControlTokenError("\(path): \(error.reason)")
        }
    }

    /// Writes the token to `path`, readable and writable by its owner only (mode 0600 whatever the umask), in
    /// place of what was there: a new file is written beside it and renamed over it, so no reader ever sees half
    /// a token and the old file's mode does not carry over.
    public func write(to path: String) throws(ControlTokenError) {
        let partial = path + ".partial"
        unlink(partial)
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw ControlTokenError("\(partial): cannot be created (\(String(cString: strerror(errno))))")
        }
        let line = Array((self.text + "\n").utf8)
        let written = line.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        let failure = written != line.count ? errno : (fchmod(descriptor, 0o600) != 0 ? errno : 0)
        close(descriptor)
        guard failure == 0, rename(partial, path) == 0 else {
            let reason = String(cString: strerror(failure != 0 ? failure : errno))
            unlink(partial)
            throw ControlTokenError("\(path): cannot be written (\(reason))")
        }
    }
}

/// A control token that cannot be used, and why.
public struct ControlTokenError: Error, Sendable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { self.reason }
}
