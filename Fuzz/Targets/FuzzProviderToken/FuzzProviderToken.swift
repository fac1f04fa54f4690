import Crypto
import Foundation
import SalvoSimulator

/// The simulator's provider-token verifier, fed the text after `bearer `: base64url parts, JSON header and claims,
/// the ES256 signature, the age and the update rule. The key is fixed (a throwaway scalar), so that a valid token
/// made with it can seed the corpus: `LLVMFuzzerInitialize` writes one into `$SALVO_FUZZ_SEED_DIR` when set.
// Not a secret: the scalar 1…32, only ever used here. Kept as bytes: Crypto's key type is not `Sendable`.
private let signingKeyBytes: [UInt8] = (1...32).map { UInt8($0) }
private var signingKey: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: signingKeyBytes) }
private let keyID = "FUZZKEY001"
private let teamID = "FUZZTEAM01"
private let issuedAt: UInt32 = 1_764_000_000

private let verifier = ProviderTokenVerifier(
    keys: [
        HTTP2EndpointConfiguration.ProviderKey(
            keyID: keyID,
            teamID: teamID,
            publicKey: Array(signingKey.publicKey.rawRepresentation)
        )
    ],
    clock: ManualClock(now: issuedAt + 60)
)

@_cdecl("LLVMFuzzerInitialize")
public func fuzzProviderTokenInitialize(
    _ argc: UnsafeMutablePointer<CInt>?,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    guard let folder = ProcessInfo.processInfo.environment["SALVO_FUZZ_SEED_DIR"] else { return 0 }
    func part(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    let header = part(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
    let claims = part(Array(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
    let signature = try! signingKey.signature(for: Array((header + "." + claims).utf8))
    let token = header + "." + claims + "." + part(signature.rawRepresentation)
    precondition(
        (try? verifier.check(Substring(token)).get()) != nil,
        "the seed token must pass, or the fuzzer never reaches the checks after the signature"
    )
    try! Data(token.utf8).write(to: URL(fileURLWithPath: folder + "/valid-token"))
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProviderToken(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    _ = verifier.check(Substring(text))
    return 0
}
