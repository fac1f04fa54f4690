import Foundation

// Written once, before `atexit` is registered; read only at exit.
nonisolated(unsafe) private var directoryToRemove: String?

/// Certificates made at test time with the `openssl` command line in a fresh temporary directory:
/// nothing private is committed. Generated once per test process.
struct TestCertificates: Sendable {
    let directory: String
    var caFile: String { path("ca.pem") }
    var serverCertificate: String { path("server.pem") }
    var serverKey: String { path("server.key") }
    var clientCertificate: String { path("client.pem") }
    var clientKey: String { path("client.key") }
    var encryptedClientKey: String { path("client-encrypted.key") }
    var clientPKCS12: String { path("client.p12") }
    var expiredClientCertificate: String { path("expired.pem") }
    var rogueCAFile: String { path("rogue-ca.pem") }
    var rogueClientCertificate: String { path("rogue-client.pem") }
    var rogueClientKey: String { path("rogue-client.key") }

    static let keyPassphrase = "correct horse"
    static let pkcs12Passphrase = "battery staple"
    static let topic = "com.example.salvo"

    static let shared: TestCertificates = {
        do {
            let certificates = try generate()
            // The directory holds private keys: remove it when the test process exits.
            directoryToRemove = certificates.directory
            atexit {
                if let directory = directoryToRemove {
                    try? FileManager.default.removeItem(atPath: directory)
                }
            }
            return certificates
        } catch {
            fatalError("cannot generate test certificates with openssl: \(error)")
        }
    }()

    func path(_ name: String) -> String { directory + "/" + name }

    private static func generate() throws -> TestCertificates {
        let directory = NSTemporaryDirectory() + "salvo-io-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificates = TestCertificates(directory: directory)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try "subjectAltName=IP:127.0.0.1,IP:::1\n".write(
            toFile: certificates.path("server.ext"),
            atomically: true,
            encoding: .utf8
        )
        try "extendedKeyUsage=clientAuth\n".write(
            toFile: certificates.path("client.ext"),
            atomically: true,
            encoding: .utf8
        )
        for ca in ["ca", "rogue-ca"] {
            try run(
                ["req", "-x509", "-new"] + ec + [
                    "-keyout", "\(ca).key", "-out", "\(ca).pem", "-days", "2",
                    "-subj", "/CN=Salvo Test \(ca)",
                ],
                in: directory
            )
        }
        func leaf(_ name: String, subject: String, ca: String, ext: String, days: String = "2") throws {
            try run(
                ["req", "-new"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject],
                in: directory
            )
            try run(
                [
                    "x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key",
                    "-CAcreateserial", "-out", "\(name).pem", "-days", days, "-extfile", ext,
                ],
                in: directory
            )
        }
        let clientSubject = "/UID=\(topic)/CN=Apple Push Services: \(topic)"
        try leaf("server", subject: "/CN=127.0.0.1", ca: "ca", ext: "server.ext")
        try leaf("client", subject: clientSubject, ca: "ca", ext: "client.ext")
        try leaf("expired", subject: clientSubject, ca: "ca", ext: "client.ext", days: "-1")
        try leaf("rogue-client", subject: clientSubject, ca: "rogue-ca", ext: "client.ext")
        try run(
            [
                "pkey", "-in", "client.key", "-out", "client-encrypted.key", "-aes256",
                "-passout", "pass:\(keyPassphrase)",
            ],
            in: directory
        )
        try run(
            [
                "pkcs12", "-export", "-in", "client.pem", "-inkey", "client.key", "-certfile", "ca.pem",
                "-out", "client.p12", "-passout", "pass:\(pkcs12Passphrase)",
            ],
            in: directory
        )
        return certificates
    }

    private static func run(_ arguments: [String], in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw NSError(
                domain: "openssl",
                code: Int(process.terminationStatus),
                userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments.joined(separator: " ")): \(text)"]
            )
        }
    }
}
