import Foundation

/// Runs `executable` with `arguments` (in `folder` when given) to its end: its exit status and what it printed,
/// standard error always and standard output too unless `standardOutput` is false (then it is dropped). The output
/// is read while the process runs, so a long one never blocks it; then the process is reaped.
public func runToEnd(
    _ executable: String,
    _ arguments: [String],
    in folder: URL? = nil,
    standardOutput: Bool = true
) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    if let folder { process.currentDirectoryURL = folder }
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = standardOutput ? pipe : FileHandle.nullDevice
    process.standardError = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, output)
}
