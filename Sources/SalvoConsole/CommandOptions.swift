import ArgumentParser
import Foundation

/// How a running job shows its progress (shared by `send`, `demo` and `soak`).
public struct ProgressOptions: ParsableArguments {
    public init() {}

    @Option(
        help: "Progress: auto (a line on a terminal, unless --quiet), json (one object per second on stderr), none."
    )
    public var progress: ProgressOption = .auto
}

/// `--connections`: a count, or `auto`.
public enum ConnectionCount: Hashable, ExpressibleByArgument, CustomStringConvertible {
    case auto
    case fixed(Int)

    public init?(argument: String) {
        if argument == "auto" {
            self = .auto
        } else if let count = Int(argument) {
            self = .fixed(count)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .fixed(let count): String(count)
        }
    }
}

/// Creates (or empties) a file for writing, with an error that names it.
public func createFile(_ path: String) throws -> FileHandle {
    guard FileManager.default.createFile(atPath: path, contents: nil) else {
        throw UserError("\(path): cannot create the file")
    }
    return try FileHandle(forWritingTo: URL(fileURLWithPath: path))
}

/// The processors online: the default number of connections and threads.
public enum Processors {
    public static var online: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
