import ArgumentParser
import Foundation
import SalvoConsole
import SalvoHTTP2

#if canImport(Glibc)
import Glibc
#endif

/// `salvo token mint --auth-key K.p8 --key-id … --team-id … --out FILE`: one provider token for a fleet of senders.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Provider tokens for HTTP/2 token authentication.",
        subcommands: [Mint.self]
    )

    struct Mint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "mint",
            abstract: "Sign a provider token (ES256) and write it to a file for `send --provider-token-file`.",
            discussion: """
                The file is JSON: {"issuedAt":UNIX,"keyID":"…","teamID":"…","token":"<JWT>"}, written whole \
                (a temporary file renamed over it, mode 0600). APNs takes a token up to 60 minutes old and refuses \
                a key's new token within 20 minutes of the last: mint every 30 to 50 minutes, from one place. \
                `--out -` writes it to standard output (to pipe into `kubectl create secret`); the token is never \
                printed otherwise.
                """
        )

        @Option(help: "The signing key (AuthKey_<key id>.p8).")
        var authKey: String

        @Option(name: .customLong("key-id"), help: "The signing key's 10-character key id.")
        var keyID: String

        @Option(name: .customLong("team-id"), help: "The 10-character team id.")
        var teamID: String

        @Option(help: "Write the token file here; `-` for standard output.")
        var out: String

        func run() async throws {
            try await exitingOnUserError {
                let signer: JWTSigner
                do throws(HTTP2ClientError) {
                    signer = try JWTSigner(p8File: self.authKey, keyID: self.keyID, teamID: self.teamID)
                } catch {
                    throw UserError(error.message)
                }
                let contents = ProviderTokenFileContents(
                    signer: signer,
                    issuedAt: Int64(Date().timeIntervalSince1970)
                )
                var key = stat()
                var target = stat()
                if stat(self.authKey, &key) == 0, stat(self.out, &target) == 0, key.st_dev == target.st_dev,
                    key.st_ino == target.st_ino
                {
                    throw UserError(
                        "--out \(self.out) is the signing key --auth-key \(self.authKey): give another path"
                    )
                }
                if self.out == "-" {
                    FileHandle.standardOutput.write(Data(contents.encoded))
                    return
                }
                do throws(HTTP2ClientError) {
                    try ProviderTokenFile.write(contents, to: self.out)
                } catch {
                    throw UserError(error.message)
                }
                // The token itself stays in the file.
                FileHandle.standardError.write(
                    Data(
                        "wrote a provider token for key \(signer.keyID) of team \(signer.teamID), issued at \(contents.issuedAt), to \(self.out)\n"
                            .utf8
                    )
                )
            }
        }
    }
}
