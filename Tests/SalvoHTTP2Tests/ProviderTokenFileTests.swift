import Crypto
import Foundation
import NIOConcurrencyHelpers
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

#if canImport(Glibc)
import Glibc
#endif

/// A token file refreshed by another process: the monitor's decisions with a fake clock, then the file reader over
/// real files (replaced by rename, and by a symlink swap as Kubernetes updates a mounted Secret).
@Suite(.tags(.network), .runs(.network)) struct ProviderTokenFileTests {
    static let start: Int64 = 1_764_000_000
    let signer: JWTSigner

    init() throws {
        self.signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    }

    func contents(_ issuedAt: Int64) -> ProviderTokenFileContents {
        ProviderTokenFileContents(signer: self.signer, issuedAt: issuedAt)
    }

    static func stamp(_ inode: UInt64) -> ProviderTokenFileMonitor.Stamp {
        .init(device: 1, inode: inode, size: 300, modified: Int64(inode) * 1_000_000_000)
    }

    // MARK: The decisions

    @Test func aChangedFileIsReadAtMostEveryFewSecondsAndANewerTokenReplacesTheCurrentOne() throws {
        var monitor = try ProviderTokenFileMonitor(
            path: "token.json",
            contents: self.contents(Self.start - 2400),
            stamp: Self.stamp(1),
            now: Self.start + 10
        )
        #expect(!monitor.shouldLook(now: Self.start + 14))
        #expect(monitor.shouldLook(now: Self.start + 15))
        #expect(monitor.looked(Self.stamp(1), now: Self.start + 15) == .unchanged)
        #expect(!monitor.shouldLook(now: Self.start + 19))
        // The file changed: read it; a newer token replaces the current one.
        #expect(monitor.looked(Self.stamp(2), now: Self.start + 20) == .read)
        #expect(
            monitor.read(.success(self.contents(Self.start + 20)), stamp: Self.stamp(2), now: Self.start + 20)
                == .replaced
        )
        #expect(monitor.current.issuedAt == Self.start + 20)
        #expect(monitor.replacements == 1)
        // Read again unchanged, then an older token (a stale replica): the current one stays.
        #expect(monitor.looked(Self.stamp(2), now: Self.start + 25) == .unchanged)
        #expect(monitor.looked(Self.stamp(3), now: Self.start + 30) == .read)
        let older = monitor.read(.success(self.contents(Self.start - 60)), stamp: Self.stamp(3), now: Self.start + 30)
        guard case .kept(let why) = older else {
            Issue.record("an older token replaced a newer one: \(older)")
            return
        }
        #expect(why.contains("token.json"))
        #expect(monitor.current.issuedAt == Self.start + 20)
        // A token from the future beyond clock skew is not taken either.
        #expect(monitor.looked(Self.stamp(4), now: Self.start + 35) == .read)
        let ahead = monitor.read(.success(self.contents(Self.start + 400)), stamp: Self.stamp(4), now: Self.start + 35)
        #expect(ahead != .replaced && monitor.current.issuedAt == Self.start + 20)
        // A clock that went back looks at once.
        #expect(monitor.shouldLook(now: Self.start + 29))
    }

    @Test func anUnreadableOrMissingFileKeepsTheCurrentTokenAndIsReadAgain() throws {
        var monitor = try ProviderTokenFileMonitor(
            path: "token.json",
            contents: self.contents(Self.start),
            stamp: Self.stamp(1),
            now: Self.start
        )
        // Missing (a symlink between targets): nothing to read.
        #expect(monitor.looked(nil, now: Self.start + 5) == .unchanged)
        #expect(monitor.looked(Self.stamp(2), now: Self.start + 10) == .read)
        let broken = HTTP2ClientError(.credentials, "token.json is not a provider token file (it is empty)")
        #expect(monitor.read(.failure(broken), stamp: Self.stamp(2), now: Self.start + 10) == .kept(broken.message))
        #expect(monitor.current.issuedAt == Self.start)
        // Reported once: the same broken file is not read again until it changes.
        #expect(monitor.looked(Self.stamp(2), now: Self.start + 15) == .unchanged)
        // Rewritten with the same issue time (minted again, or the same token): nothing changes.
        #expect(monitor.looked(Self.stamp(3), now: Self.start + 20) == .read)
        #expect(monitor.read(.success(self.contents(Self.start)), stamp: Self.stamp(3), now: Self.start + 20) == .same)
        #expect(monitor.looked(Self.stamp(3), now: Self.start + 25) == .unchanged)
    }

    @Test func aStaleOrFutureTokenIsRefusedAtStart() throws {
        let path = "/var/run/salvo/token.json"
        let error = #expect(throws: HTTP2ClientError.self) {
            try ProviderTokenFileMonitor(
                path: path,
                contents: self.contents(Self.start),
                stamp: Self.stamp(1),
                now: Self.start + 3600
            )
        }
        #expect(error?.message.contains(path) == true)
        #expect(error?.message.contains("60 min 0 s") == true)
        _ = try ProviderTokenFileMonitor(
            path: path,
            contents: self.contents(Self.start),
            stamp: Self.stamp(1),
            now: Self.start + 3599
        )
        #expect(throws: HTTP2ClientError.self) {
            try ProviderTokenFileMonitor(
                path: path,
                contents: self.contents(Self.start + 301),
                stamp: Self.stamp(1),
                now: Self.start
            )
        }
    }

    @Test func anAgingTokenIsReportedOnceAndExpiryWithoutANewerFileStops() throws {
        var monitor = try ProviderTokenFileMonitor(
            path: "token.json",
            contents: self.contents(Self.start),
            stamp: Self.stamp(1),
            now: Self.start
        )
        #expect(monitor.warning(now: Self.start + 55 * 60 - 1) == nil)
        let firstWarning = monitor.warning(now: Self.start + 55 * 60)
        let warning = try #require(firstWarning)
        #expect(warning.contains("token.json") && warning.contains("55 min"))
        #expect(!warning.contains(monitor.current.token))
        #expect(monitor.warning(now: Self.start + 58 * 60) == nil)

        let rejected = monitor.current.bearer
        guard case .refused(let message) = monitor.renewal(after: rejected, now: Self.start + 3600) else {
            Issue.record("an expired token with no newer one in the file did not stop the job")
            return
        }
        #expect(message.contains("token.json") && message.contains("ExpiredProviderToken"))
        // A newer token arrived: send again with it, and warn about it in its own time.
        _ = monitor.looked(Self.stamp(2), now: Self.start + 3600)
        _ = monitor.read(.success(self.contents(Self.start + 3000)), stamp: Self.stamp(2), now: Self.start + 3600)
        #expect(monitor.renewal(after: rejected, now: Self.start + 3600) == .renewed)
        #expect(monitor.warning(now: Self.start + 3600) == nil)
    }

    // MARK: Files

    @Test func theFileIsParsedStrictlyAndWrittenPrivately() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("token.json")
        let contents = self.contents(Self.start)
        try ProviderTokenFile.write(contents, to: path)
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try ProviderTokenFile.read(path).get() == contents)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["token.json"])

        func refused(_ text: String) -> String? {
            do {
                _ = try ProviderTokenFileContents(parsing: Array(text.utf8), path: path)
                return nil
            } catch {
                return error.message
            }
        }
        #expect(refused("")?.contains(path) == true)
        #expect(refused("eyJhbGciOiJFUzI1NiJ9") != nil)
        var other = contents
        other.issuedAt += 1
        #expect(refused(String(decoding: other.encoded, as: UTF8.self))?.contains("iat") == true)
        other = contents
        other.teamID = "OTHERTEAM1"
        #expect(refused(String(decoding: other.encoded, as: UTF8.self))?.contains("issuer") == true)
        other = contents
        other.token = "a.b.c"
        let message = refused(String(decoding: other.encoded, as: UTF8.self))
        #expect(message?.contains("not a JSON Web Token") == true)
    }

    @Test func aMissingMalformedOrStaleFileIsRefusedNamingIt() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let clock = ManualClock(Self.start)
        let missing = folder.file("missing.json")
        let error = #expect(throws: HTTP2ClientError.self) {
            try ProviderTokenFile(path: missing, clock: clock.function)
        }
        #expect(error?.message.contains(missing) == true)

        let malformed = folder.file("malformed.json")
        try "{\"token\":\"x\"}".write(toFile: malformed, atomically: true, encoding: .utf8)
        #expect(throws: HTTP2ClientError.self) { try ProviderTokenFile(path: malformed, clock: clock.function) }

        let stale = folder.file("stale.json")
        try ProviderTokenFile.write(self.contents(Self.start - 3600), to: stale)
        let staleError = #expect(throws: HTTP2ClientError.self) {
            try ProviderTokenFile(path: stale, clock: clock.function)
        }
        #expect(staleError?.message.contains(stale) == true)
    }

    @Test func aFileReplacedByRenameOrBySwappingASymlinkIsReadAgain() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let clock = ManualClock(Self.start)
        // As Kubernetes mounts a Secret: token.json -> ..data/token.json, ..data -> a timestamped folder.
        let first = folder.file("..2026_11_25_14_00_00.1")
        try FileManager.default.createDirectory(atPath: first, withIntermediateDirectories: false)
        try ProviderTokenFile.write(self.contents(Self.start - 2400), to: first + "/token.json")
        #expect(symlink("..2026_11_25_14_00_00.1", folder.file("..data")) == 0)
        #expect(symlink("..data/token.json", folder.file("token.json")) == 0)
        let warnings = NIOLockedValueBox([String]())
        let file = try ProviderTokenFile(path: folder.file("token.json"), clock: clock.function) { message in
            warnings.withLockedValue { $0.append(message) }
        }
        let token = ProviderToken(file: file)
        #expect(token.current().issuedAt == Self.start - 2400)

        // The CronJob's new token: a new folder, then the ..data link replaced by rename.
        let second = folder.file("..2026_11_25_14_40_00.2")
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: false)
        try ProviderTokenFile.write(self.contents(Self.start), to: second + "/token.json")
        #expect(symlink("..2026_11_25_14_40_00.2", folder.file("..data_tmp")) == 0)
        #expect(rename(folder.file("..data_tmp"), folder.file("..data")) == 0)
        try FileManager.default.removeItem(atPath: first)
        clock.advance(by: 2)
        // Not looked at again within the interval.
        #expect(token.current().issuedAt == Self.start - 2400)
        clock.advance(by: ProviderTokenFileMonitor.checkInterval)
        #expect(token.current().issuedAt == Self.start)
        #expect(file.replacements == 1)

        // A plain file replaced by rename (`salvo token mint --out` on a shared volume).
        let plain = folder.file("plain.json")
        try ProviderTokenFile.write(self.contents(Self.start), to: plain)
        let plainFile = try ProviderTokenFile(path: plain, clock: clock.function)
        try ProviderTokenFile.write(self.contents(Self.start + 2400), to: plain)
        clock.advance(by: 2400)
        let renewed = ProviderToken(file: plainFile)
        #expect(renewed.current().issuedAt == Self.start + 2400)
        #expect(renewed.mintCount == 0)
        #expect(warnings.withLockedValue { $0 } == [])
    }

    @Test func expiryIsAnsweredFromTheFileAtOnceAndStopsWithoutANewerToken() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let clock = ManualClock(Self.start + 50 * 60)
        let path = folder.file("token.json")
        try ProviderTokenFile.write(self.contents(Self.start), to: path)
        let warnings = NIOLockedValueBox([String]())
        let token = ProviderToken(
            file: try ProviderTokenFile(path: path, clock: clock.function) { message in
                warnings.withLockedValue { $0.append(message) }
            }
        )
        let first = token.current()
        clock.advance(by: 6 * 60)
        #expect(token.current() == first)
        #expect(warnings.withLockedValue { $0.count } == 1)
        #expect(warnings.withLockedValue { $0.allSatisfy { !$0.contains(first.authorization.dropFirst(7)) } })
        clock.advance(by: 4 * 60)
        guard case .refused(let message) = token.renew(after: first) else {
            Issue.record("ExpiredProviderToken with no newer file did not stop the job")
            return
        }
        #expect(message.contains(path))
        // A new token written just now is taken at once, without waiting for the interval.
        try ProviderTokenFile.write(self.contents(Self.start + 60 * 60), to: path)
        #expect(token.renew(after: first) == .renewed)
        #expect(token.current().issuedAt == Self.start + 60 * 60)
    }
}
