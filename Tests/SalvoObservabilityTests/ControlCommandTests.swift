import Dispatch
import Foundation
import SalvoObservability
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `salvo simulate --control-port` and `salvo soak --gateway … --control …` as an operator runs them: the real
/// executable, its banner, its sockets and its files.
@Suite(.tags(.process), .runs(.process)) struct ControlCommandTests {
    /// `salvo`, built next to the test bundle by `swift build`; nil (with an issue recorded) when it is not.
    static var salvo: String? {
        guard let path = TestProcess.salvoPath else {
            Issue.record(Comment(rawValue: TestProcess.salvoMissing))
            return nil
        }
        return path
    }

    /// A running `salvo simulate`: its banner lines, read until the control line (bounded), and its process.
    final class Simulate {
        let run: TestProcess
        var banner: [String] { self.run.output.split(separator: "\n").map(String.init) }

        init(_ salvo: String, _ arguments: [String]) async throws {
            self.run = try TestProcess(
                salvo,
                ["simulate", "--gateway-port", "0", "--feedback-port", "0"] + arguments
            )
            try await eventually("the banner's control line", timeout: .seconds(30)) {
                self.banner.contains { $0.contains("control ") } || !self.run.isRunning
            }
        }

        /// The value after `label` on the banner line that starts with it (`gateway`, `control` …).
        func line(_ label: String) -> String? {
            self.banner.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label + " ") }
        }

        /// The port of the `http://HOST:PORT` (or `HOST:PORT`) on the line labelled `label`.
        func port(_ label: String) -> Int? {
            guard let line = self.line(label) else { return nil }
            let address = line.split(separator: " ").first { $0.contains(":") && $0 != label }
            return address.flatMap {
                Int($0.split(separator: ":").last!.trimmingCharacters(in: .punctuationCharacters))
            }
        }

        /// SIGINT, then a bounded wait (10 s); killed if it is still running.
        func stop() async {
            self.run.signal(SIGINT)
            _ = try? await self.run.wait(seconds: 10)
        }
    }

    /// The IPv4 addresses (hex, as /proc/net/tcp writes them) listening on `port`.
    static func listeners(port: Int) -> [String] {
        // Read to the end in a loop: the kernel writes the table a page or so per read.
        let descriptor = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        let table = String(decoding: bytes, as: UTF8.self)
        return table.split(separator: "\n").dropFirst().compactMap { row in
            let fields = row.split(separator: " ")
            guard fields.count > 3, fields[3] == "0A" else { return nil }
            let local = fields[1].split(separator: ":")
            guard local.count == 2, Int(local[1], radix: 16) == port else { return nil }
            return String(local[0])
        }
    }

    static func folder() throws -> String {
        let folder = TestScratch.root.appendingPathComponent("salvo-control-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    /// With `--host 0.0.0.0` the gateway listens everywhere, the control endpoint on loopback only; its token is
    /// printed, written for the owner only beside the certificates, asked of every request, and `salvo soak`
    /// finds it there.
    @Test func theControlEndpointListensOnLoopbackWithATokenTheSoakUses() async throws {
        guard let salvo = Self.salvo else { return }
        let certificates = try Self.folder() + "/certs"
        let simulate = try await Simulate(
            salvo,
            ["--host", "0.0.0.0", "--control-port", "0", "--certificates", certificates]
        )
        // A test that throws before its end: the run is let go, and `TestProcess` kills it.
        defer { simulate.run.signal(SIGKILL) }
        let control = try #require(simulate.port("control"), "\(simulate.banner)")
        let gateway = try #require(simulate.port("gateway"), "\(simulate.banner)")
        #expect(Self.listeners(port: gateway) == ["00000000"], "the gateway follows --host")
        #expect(Self.listeners(port: control) == ["0100007F"], "the control endpoint stays on 127.0.0.1")

        let file = certificates + "/" + ControlToken.fileName
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let token = try ControlToken.read(from: file)
        #expect(simulate.line("control")?.contains(token.text) == true, "the banner prints the token")

        #expect(controlRequest(port: control, "GET", "/ledger")?.status == 401)
        #expect(controlRequest(port: control, "GET", "/ledger", authorization: "Bearer \(token.text)")?.status == 200)

        // The soak reads the token from the certificate folder, sends it, and its rounds are judged.
        let (status, text) = try await TestProcess.run(
            salvo,
            [
                "soak", "--gateway", "127.0.0.1:\(gateway)", "--control", "127.0.0.1:\(control)", "--certificates",
                certificates, "--rounds", "1", "--tokens", "500", "--duration", "60s", "--progress", "none",
            ]
        )
        #expect(status == 0, "\(text)")
        #expect(text.contains("soak: PASS"), "\(text)")
        await simulate.stop()
    }

    /// `--control-token-file` supplies the token (nothing is written beside the certificates), `--control-host`
    /// moves the endpoint, and a soak with another token is refused with the status named.
    @Test func aGivenTokenFileAndHostAreUsed() async throws {
        guard let salvo = Self.salvo else { return }
        let folder = try Self.folder()
        let given = ControlToken.random()
        try given.write(to: folder + "/token")
        let simulate = try await Simulate(
            salvo,
            [
                "--control-port", "0", "--control-host", "127.0.0.2", "--control-token-file", folder + "/token",
                "--certificates", folder + "/certs",
            ]
        )
        // A test that throws before its end: the run is let go, and `TestProcess` kills it.
        defer { simulate.run.signal(SIGKILL) }
        let control = try #require(simulate.port("control"), "\(simulate.banner)")
        #expect(Self.listeners(port: control) == ["0200007F"])
        #expect(simulate.line("control")?.contains(given.text) == false, "a given token is not printed")
        #expect(!FileManager.default.fileExists(atPath: folder + "/certs/" + ControlToken.fileName))

        let other = ControlToken.random()
        try other.write(to: folder + "/other")
        let (status, text) = try await TestProcess.run(
            salvo,
            [
                "soak", "--gateway", "127.0.0.1:\(try #require(simulate.port("gateway")))", "--control",
                "127.0.0.2:\(control)", "--certificates", folder + "/certs", "--control-token-file", folder + "/other",
                "--rounds", "1", "--tokens", "100", "--duration", "60s", "--progress", "none",
            ]
        )
        #expect(status != 0)
        #expect(text.contains("401"), "\(text)")
        await simulate.stop()
    }
}
