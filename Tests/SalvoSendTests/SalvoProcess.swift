import Foundation
import Testing

/// Runs the built `salvo` in a fresh folder holding `files` (name, which may hold a folder → contents) and returns its exit status and what
/// it wrote to the chosen stream; nil (with the issue recorded) when the executable is not built next to the tests.
func runSalvo(
    _ arguments: [String],
    files: [String: String],
    folderPrefix: String,
    readStandardError: Bool
) throws -> (status: Int32, text: String)? {
    guard let salvo = InterruptionTests.executable else {
        Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
        return nil
    }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(folderPrefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for (name, contents) in files {
        // A name may hold a folder ("templates/pt.json").
        let file = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: file)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: salvo)
    process.currentDirectoryURL = folder
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = readStandardError ? FileHandle.nullDevice : pipe
    process.standardError = readStandardError ? pipe : FileHandle.nullDevice
    try process.run()
    // Read while it runs, so that a long output never blocks it; then reap it.
    let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}
