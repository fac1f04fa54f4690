import APNSWire
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

// The CSV reader works on files (it reads in chunks with `pread`): each input is written to one file, rewritten
// every run. Set once in the first call; libFuzzer calls from one thread.
nonisolated(unsafe) private var inputPath: String?

/// A token file as `salvo send` and `salvo check` read it: `TokenSource` validates it (the CSV reader and the token
/// parsers), then hands out every valid row. The first byte chooses the options (header mode, column, encoding,
/// dedupe), the rest is the file. Every valid row must come out exactly once, and be read again from its file by
/// its reference.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenFile(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard count > 0, let data else { return 0 }
    let choice = data[0]
    let path =
        inputPath
        ?? {
            let path = "/tmp/salvo-fuzz-tokens-\(getpid()).csv"
            inputPath = path
            return path
        }()
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(descriptor >= 0, "cannot write \(path)")
    var written = 0
    while written < count - 1 {
        let result = write(descriptor, data + 1 + written, count - 1 - written)
        precondition(result > 0, "cannot write \(path)")
        written += result
    }
    close(descriptor)

    var options = TokenSource.Options()
    options.header = [HeaderMode.auto, .present, .absent][Int(choice & 3) % 3]
    options.column = choice & 4 != 0 ? .number(Int(choice >> 5) + 1) : .name(choice & 8 != 0 ? "Token" : "token")
    options.encoding = choice & 16 != 0 ? .base64 : .hex
    options.dedupe = choice & 0x80 != 0 && choice & 4 == 0
    let source = TokenSource(files: [path], options: options)
    guard let summary = try? source.validate() else { return 0 }
    precondition(summary.inputRows >= summary.validRows)
    var rows = 0
    // A row is at least one byte: at most `count` rows, in chunks of at least one.
    for _ in 0...count {
        guard let chunk = try? source.nextChunk(maximumRows: 64) else { break }
        for row in chunk {
            precondition((try? source.token(at: row.reference)) == row.token, "a row read again differs")
        }
        rows += chunk.count
    }
    precondition(rows == summary.validRows, "validated \(summary.validRows) rows, handed out \(rows)")
    return 0
}
