import Foundation
import NIOSSL
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing
import X509

@Suite(.tags(.pure), .runs(.pure)) struct CertificateFactoryTests {
    @Test func clientCertificateCarriesTheTopicAsUID() throws {
        let certificates = try CertificateFactory()
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
        let folder = TestScratch.root.appendingPathComponent("salvo-certs-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let paths = try CertificateFactory.ensure(in: folder, topic: "com.example.app")
        for path in [paths.ca, paths.server, paths.serverKey, paths.client, paths.clientKey, paths.foreignClient] {
            #expect(FileManager.default.fileExists(atPath: path))
        }
        let before = try String(contentsOfFile: paths.ca, encoding: .utf8)
        _ = try CertificateFactory.ensure(in: folder, topic: "com.example.app")
        #expect(try String(contentsOfFile: paths.ca, encoding: .utf8) == before)
        let foreign = try Certificate(pemEncoded: try String(contentsOfFile: paths.foreignClient, encoding: .utf8))
        let ca = try Certificate(pemEncoded: before)
        let client = try Certificate(pemEncoded: try String(contentsOfFile: paths.client, encoding: .utf8))
        // Another CA: another issuer name, and a signature the development CA's key did not make.
        #expect(foreign.issuer != ca.subject)
        #expect(ca.publicKey.isValidSignature(client.signature, for: client))
        #expect(!ca.publicKey.isValidSignature(foreign.signature, for: foreign))
    }

    @Test func theFolderHoldsAnExpiredClientAnEncryptedKeyAndPKCS12() throws {
        let paths = CertificateFactory.sharedFolder
        let expired = try Certificate(pemEncoded: try String(contentsOfFile: paths.expiredClient, encoding: .utf8))
        #expect(expired.notValidAfter < Date())
        #expect(UserID.first(in: expired.subject) == CertificateFactory.sharedTopic)
        let plain = try NIOSSLPrivateKey(file: paths.clientKey, format: .pem)
        let decrypted = try NIOSSLPrivateKey(file: paths.encryptedClientKey, format: .pem) { setter in
            setter(Array(CertificateFactory.keyPassphrase.utf8))
        }
        #expect(decrypted == plain)
        let bundle = try NIOSSLPKCS12Bundle(
            file: paths.clientPKCS12,
            passphrase: Array(CertificateFactory.pkcs12Passphrase.utf8)
        )
        #expect(bundle.privateKey == plain)
        let client = try #require(try NIOSSLCertificate.fromPEMFile(paths.client).first)
        #expect(bundle.certificateChain.first == client)
    }
}
