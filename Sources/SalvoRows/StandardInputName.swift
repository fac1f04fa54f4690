import NIOConcurrencyHelpers

/// The input file name `-`: standard input, once it is spooled into a regular file.
///
/// A job reads its input more than once and by offset (the binary interface rewinds to a failed identifier and
/// reads those rows again; `TokenSource` keeps one descriptor per file and reads at offsets), which a pipe cannot
/// do. So the command line copies standard input into a file first (`StandardInputSpool`) and registers it here.
/// Every list of files keeps the name `-`: it is what the rejects' `file` column, the unsettled file, the report's
/// input files, the journal's manifest and every message show. Only the calls that open or stat an input file ask
/// `path(of:)` for the file to use.
public enum StandardInputName {
    /// How a command line names standard input among its input files.
    public static let name = "-"

    /// How messages name it where `-` alone would read oddly.
    public static let described = "(standard input)"

    private static let spool = NIOLockedValueBox<String?>(nil)

    /// From now on, `-` is read from the file at `path` (the spool).
    public static func use(spool path: String) {
        Self.spool.withLockedValue { $0 = path }
    }

    /// Other inputs that are not files (`postgres`: a query's rows), by name, each with the file that holds them.
    private static let sources = NIOLockedValueBox<[String: String]>([:])

    /// From now on, the input named `name` (a source that is not a file, such as `postgres`) is read from the file
    /// at `path`; every message and output still names it `name`.
    public static func use(spool path: String, for name: String) {
        Self.sources.withLockedValue { $0[name] = path }
    }

    /// The file to open for the input file `name`: the spool for `-` or another registered source once one is
    /// registered, else `name` itself.
    public static func path(of name: String) -> String {
        guard name == Self.name else { return Self.sources.withLockedValue { $0[name] } ?? name }
        return Self.spool.withLockedValue { $0 } ?? name
    }
}
