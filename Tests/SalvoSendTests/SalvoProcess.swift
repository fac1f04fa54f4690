import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import Testing

/// A fresh folder under `TestScratch` named from `prefix`, holding `files` (name, which may hold a folder → contents).
func folderHolding(_ files: [String: String], prefix: String) throws -> URL {
    let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for (name, contents) in files {
        // A name may hold a folder ("templates/pt.json").
        let file = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: file)
    }
    return folder
}

/// Runs the built `salvo` in a fresh folder holding `files` (`folderHolding`) to its end: its exit status and what it
/// wrote to standard error (`readStandardError`) or standard output; nil (with the issue recorded) when the
/// executable is not built next to the tests.
func runSalvo(
    _ arguments: [String],
    files: [String: String],
    folderPrefix: String,
    readStandardError: Bool
) async throws -> (status: Int32, text: String)? {
    guard let salvo = InterruptionTests.builtExecutable else { return nil }
    let folder = try folderHolding(files, prefix: folderPrefix)
    let output: TestProcess.Output = readStandardError ? .standardErrorOnly : .standardOutputOnly
    let (status, text) = try await TestProcess.run(salvo, arguments, in: folder, output: output)
    return (status, text)
}

/// What `salvo send` adds to a binary send's arguments to send over HTTP/2 to the simulator with the shared test
/// certificates.
let h2SendArguments = [
    "--protocol", "h2", "--server-name", "localhost", "--topic", CertificateFactory.sharedTopic, "--push-type", "alert",
]

/// A fresh folder holding `tokens.csv` (a header and `count` tokens from `seed`, one a line) and `payload.json`, for a
/// send by the executable; the folder and the tokens in file order.
func sendFolder(_ prefix: String, tokens count: Int, seed: UInt64) throws -> (folder: URL, tokens: [String]) {
    let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    var generator = TokenGenerator(seed: seed)
    let tokens = (0..<count).map { _ in generator.next().hexString }
    try Data(("token\n" + tokens.joined(separator: "\n") + "\n").utf8)
        .write(to: folder.appendingPathComponent("tokens.csv"))
    try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
    return (folder, tokens)
}
