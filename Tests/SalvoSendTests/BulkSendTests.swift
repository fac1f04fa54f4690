import APNSWire
import Foundation
import SalvoBinary
import SalvoIO
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A folder of its own for each test.
private func folder() throws -> String {
    let path = TestScratch.root.appendingPathComponent("salvo-send-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

private func tokenFile(in folder: String, tokens: [DeviceToken], extra: String = "") throws -> String {
    let path = folder + "/tokens.csv"
    let text = "token\n" + tokens.map { $0.hexString + "\n" }.joined() + extra
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

private func anyToken() -> DeviceToken {
    var generator = TokenGenerator(seed: 3)
    return generator.next()
}

/// A binary configuration to a port where nothing listens, for jobs that check or prepare and never connect.
func unusedBinaryInterface(payload: Payload? = nil) throws -> SendRequest.Interface {
    let payload = try payload ?? Payload(json: #"{"aps":{"alert":"hi"}}"#)
    return .binary(
        BinaryJobConfiguration(
            host: "127.0.0.1",
            port: 9,
            credentials: GatewayCredentials(identity: nil),
            template: try FrameTemplate(command: .framed, payload: payload)
        )
    )
}

@Suite(.tags(.network), .runs(.network)) struct SendRequestCheckTests {
    @Test func controlCharactersFromTheInputAreEscapedBeforeTheyReachATerminal() {
        #expect(TerminalText.escaped("ab\u{1B}[2Jc\r\u{7}") == "ab\\u{1B}[2Jc\\u{D}\\u{7}")
        #expect(TerminalText.escaped("plain, é") == "plain, é")
    }

    /// An input with no row (a header only) is a job that could not run, refused before anything connects: the one
    /// rule for every kind of input (a query that returns no rows is refused the same way).
    @Test func anEmptyTokenFileIsRefusedBeforeAnyConnection() async throws {
        let here = try folder()
        let input = try tokenFile(in: here, tokens: [])
        // Port 9 with no client certificate: any connect would fail the job.
        let request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(),
            outputs: SendOutputs(report: here + "/report.json")
        )
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.code == .input)
        #expect(error?.message.contains("no row to send") == true, "\(error?.message ?? "")")
    }

    @Test func anOutputThatNamesAnInputFileIsRefusedBeforeSending() async throws {
        let here = try folder()
        let input = try tokenFile(in: here, tokens: [anyToken()])
        let request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(),
            outputs: SendOutputs(rejects: here + "/./tokens.csv")
        )
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.code == .output)
        #expect(error?.message.contains("--rejects") == true)
        #expect(error?.message.contains("is an input file") == true)
    }

    @Test func twoOutputsOnOnePathAreRefused() async throws {
        let here = try folder()
        let input = try tokenFile(in: here, tokens: [anyToken()])
        let request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(),
            outputs: SendOutputs(report: here + "/out.json", rejects: here + "/out.json")
        )
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.message.contains("--rejects and --report both name") == true)
    }

    @Test func anOutputInAFolderThatDoesNotExistIsRefused() async throws {
        let here = try folder()
        let input = try tokenFile(in: here, tokens: [anyToken()])
        let request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(),
            outputs: SendOutputs(report: here + "/missing/report.json")
        )
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.code == .output)
        #expect(error?.message.contains("cannot create the file") == true)
    }

    @Test func aMissingInputFileIsAnInputError() async throws {
        let request = SendRequest(files: ["/nonexistent/tokens.csv"], interface: try unusedBinaryInterface())
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.code == .input)
        #expect(error?.message.contains("/nonexistent/tokens.csv") == true)
    }

    @Test func namedGatewaysForBothInterfaces() throws {
        #expect(GatewayAddress(parsing: "production", for: .binary)?.description == "gateway.push.apple.com:2195")
        #expect(GatewayAddress(parsing: "sandbox", for: .http2)?.description == "api.sandbox.push.apple.com:443")
        #expect(GatewayAddress(parsing: "sandbox", for: .feedback)?.port == 2196)
        #expect(GatewayAddress(parsing: "[::1]:2195", for: .binary) == GatewayAddress(host: "::1", port: 2195))
        #expect(GatewayAddress(parsing: "[::1]:2195", for: .binary)?.description == "[::1]:2195")
        #expect(GatewayAddress(parsing: "localhost", for: .binary) == nil)
        #expect(GatewayAddress(parsing: ":80", for: .binary) == nil)
        #expect(GatewayAddress(parsing: "host:70000", for: .binary) == nil)
    }
}

@Suite(.tags(.network), .runs(.network)) struct BulkSendTests {
    @Test func aBinarySendWritesTheReportAndEveryRefusedRowWithItsFile() async throws {
        var generator = TokenGenerator(seed: 11)
        let tokens = (0..<500).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.invalidTokens = [tokens[7].hexString, tokens[300].hexString]
        let setup = try await BinarySimulatorSetup.start("salvo-send", plan: plan)
        let simulator = setup.simulator
        let here = setup.folder
        let input = try setup.tokenFile(tokens, extra: "not-a-token\n")
        let job = try setup.job()
        let outputs = SendOutputs(report: here + "/report.json", rejects: here + "/rejects.csv")
        let send = try await BulkSend.prepare(SendRequest(files: [input], interface: .binary(job), outputs: outputs))
        #expect(send.summary.validRows == 500)
        let result: SendResult
        do {
            result = try await send.run()
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()

        #expect(result.report.rejected == ["InvalidToken": 2])
        #expect(result.report.delivered == 498)
        #expect(!result.isComplete)
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: URL(fileURLWithPath: here + "/report.json"))
        )
        #expect(report == result.report)
        let rejects = try String(contentsOfFile: here + "/rejects.csv", encoding: .utf8).split(separator: "\n")
        #expect(rejects.first == "file,line,token,status,reason")
        #expect(rejects.count == 4, "the header, the bad input row, and the two refused tokens")
        #expect(rejects[1].hasPrefix("\(input),502,not-a-token"))
        #expect(rejects[2] == "\(input),9,\(tokens[7].hexString),8,InvalidToken")
        #expect(rejects[3] == "\(input),302,\(tokens[300].hexString),8,InvalidToken")
    }
}
