import Crypto
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// One provider token per signing key, shared through the cache file by every process (here: independent
/// `ProviderToken` and `ProviderTokenCache` instances, as two processes have), and the job that stops at the first
/// `TooManyProviderTokenUpdates` rather than retrying every row.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct ProviderTokenCacheTests {
    static let keyBytes = P256.Signing.PrivateKey().rawRepresentation
    static var key: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: keyBytes) }
    static let start: Int64 = 1_700_000_000

    static func token(
        _ path: String,
        key: P256.Signing.PrivateKey = Self.key,
        now: NIOLockedValueBox<Int64>
    ) throws -> ProviderToken {
        try ProviderToken(
            signer: try JWTSigner(privateKey: key, keyID: "KEY1234567", teamID: "TEAM123456"),
            cache: try ProviderTokenCache(path: path),
            clock: { now.withLockedValue { $0 } }
        )
    }

    @Test func independentInstancesShareOneTokenWhileItIsYoungEnough() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("cache/provider-tokens.json")
        let now = NIOLockedValueBox(Self.start)
        let first = try Self.token(path, now: now)
        let second = try Self.token(path, now: now)
        let bearer = first.current()
        now.withLockedValue { $0 += 30 * 60 }
        #expect(second.current() == bearer, "30 minutes old: reused")
        #expect(first.mintCount + second.mintCount == 1)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(!(try String(contentsOfFile: path, encoding: .utf8)).isEmpty)

        // Past refreshAfter (45 minutes): the next one mints, and the other takes it from the cache.
        now.withLockedValue { $0 += 16 * 60 }
        let renewed = second.current()
        #expect(renewed != bearer && renewed.issuedAt == Self.start + 46 * 60)
        #expect(first.current() == renewed)
        #expect(first.mintCount + second.mintCount == 2)

        // Another key under the same key id never gets that token.
        let other = try Self.token(path, key: P256.Signing.PrivateKey(), now: now)
        #expect(other.current() != renewed && other.mintCount == 1)
        #expect(first.current() == renewed)
    }

    @Test func instancesStartingTogetherMintOneToken() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("provider-tokens.json")
        let now = NIOLockedValueBox(Self.start)
        let tokens = try (0..<8).map { _ in try Self.token(path, now: now) }
        let seen = NIOLockedValueBox<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: tokens.count) { index in
            let bearer = tokens[index].current()
            seen.withLockedValue { _ = $0.insert(bearer.authorization) }
        }
        #expect(seen.withLockedValue { $0.count } == 1)
        #expect(tokens.map(\.mintCount).reduce(0, +) == 1)
    }

    @Test func anExpiredTokenIsRenewedOnceThroughTheCache() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("provider-tokens.json")
        let now = NIOLockedValueBox(Self.start)
        let first = try Self.token(path, now: now)
        let second = try Self.token(path, now: now)
        let rejected = first.current()
        #expect(second.current() == rejected)
        now.withLockedValue { $0 += 25 * 60 }
        #expect(first.renew(after: rejected) == .renewed)
        // The other process gets the same answer for the same token and takes the renewal from the cache.
        #expect(second.renew(after: rejected) == .renewed)
        #expect(first.current() == second.current() && first.current() != rejected)
        #expect(first.mintCount + second.mintCount == 2)
    }

    /// Two jobs a minute apart with one key, as two runs of `salvo send` within 20 minutes: with the cache the
    /// second reuses the first one's token and delivers every row; without it the second mints a new token, and
    /// its first answer (TooManyProviderTokenUpdates) stops it with no row retried.
    @Test func aSecondJobReusesTheTokenOrStopsAtTheFirstRefusal() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let path = folder.file("provider-tokens.json")
        let wall = Int64(Date().timeIntervalSince1970)
        func authentication(offset: Int64, cache: Bool) throws -> APNSAuthentication {
            .token(
                try ProviderToken(
                    signer: setup.signer,
                    cache: cache ? try ProviderTokenCache(path: path) : nil,
                    clock: { wall + offset }
                )
            )
        }
        let first = try TokenFile(count: 50, seed: 61, in: folder)
        let one = try await HTTP2Job.run(
            configuration: setup.job(authentication: try authentication(offset: 0, cache: true)),
            source: first.source,
            summary: first.summary
        )
        #expect(one.stopped == nil && one.report.confirmed == 50)

        let second = try TokenFile(count: 50, seed: 62, in: folder)
        let two = try await HTTP2Job.run(
            configuration: setup.job(authentication: try authentication(offset: 60, cache: true)),
            source: second.source,
            summary: second.summary
        )
        #expect(two.stopped == nil && two.report.confirmed == 50)

        let third = try TokenFile(count: 50, seed: 63, in: folder)
        let three = try await HTTP2Job.run(
            configuration: setup.job(authentication: try authentication(offset: 60, cache: false), connections: 1),
            source: third.source,
            summary: third.summary
        )
        #expect(three.stopped?.reason == "TooManyProviderTokenUpdates")
        #expect(three.report.confirmed == 0)
        #expect(three.report.resent == 0, "no row is sent again")
        #expect(three.report.rejectedTotal == 0, "refused for the token: not a rejection")
        #expect(three.unsettledRows.count == 50 && three.notSent == 50, "every row listed, to be sent again")
        try await setup.simulator.shutdown()
    }
}
