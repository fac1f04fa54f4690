import Foundation
import Testing
import X509

@testable import SalvoSimulator

@Suite struct CertificateTests {
    @Test func clientCertificateCarriesTheTopicAsUID() throws {
        let certificates = try DevelopmentCertificates()
        let client = try Certificate(pemEncoded: try certificates.client(topic: "com.example.app").certificatePEM)
        #expect(UserID.first(in: client.subject) == "com.example.app")
        let bare = try Certificate(pemEncoded: try certificates.client(topic: nil).certificatePEM)
        #expect(UserID.first(in: bare.subject) == nil)
        let ca = try Certificate(pemEncoded: certificates.ca.certificatePEM)
        #expect(client.issuer == ca.subject)
        let server = try Certificate(pemEncoded: certificates.server.certificatePEM)
        let names = try #require(try server.extensions.subjectAlternativeNames)
        #expect(names.contains(.dnsName("localhost")))
    }

    @Test func writesAFolderAndReusesIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-certs-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let paths = try DevelopmentCertificates.ensure(in: folder, topic: "com.example.app")
        for path in [paths.ca, paths.server, paths.serverKey, paths.client, paths.clientKey, paths.foreignClient] {
            #expect(FileManager.default.fileExists(atPath: path))
        }
        let before = try String(contentsOfFile: paths.ca, encoding: .utf8)
        _ = try DevelopmentCertificates.ensure(in: folder, topic: "com.example.app")
        #expect(try String(contentsOfFile: paths.ca, encoding: .utf8) == before)
        let foreign = try Certificate(pemEncoded: try String(contentsOfFile: paths.foreignClient, encoding: .utf8))
        let ca = try Certificate(pemEncoded: before)
        let client = try Certificate(pemEncoded: try String(contentsOfFile: paths.client, encoding: .utf8))
        // Same issuer name, different key: only the signature tells them apart.
        #expect(foreign.issuer == ca.subject)
        #expect(ca.publicKey.isValidSignature(client.signature, for: client))
        #expect(!ca.publicKey.isValidSignature(foreign.signature, for: foreign))
    }
}
