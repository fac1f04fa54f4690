/// The inputs of a job that are not files of their own name, each with the file that holds it: standard input (`-`)
/// spooled into a file, a query's rows (`postgres`) copied into one, perhaps still being written (`GrowingInput`).
///
/// The name is what every message, the report, the rejects and the journal's manifest show; only the calls that
/// open or stat an input ask `path(of:)` for the file to use. It travels with the request that names the inputs,
/// so that two jobs in one process (a test's, the service's) never read each other's spools.
public struct InputSpools: Sendable {
    /// The file that holds one named input.
    public struct Spool: Sendable {
        public var path: String
        /// Set while another part of the process still writes the file: its readers wait at its end for more.
        public var growing: GrowingInput?

        public init(path: String, growing: GrowingInput? = nil) {
            self.path = path
            self.growing = growing
        }
    }

    private var spools: [String: Spool] = [:]

    /// No spool: every input is the file of its name.
    public init() {}

    /// The input named `name` is read from `spool`.
    public mutating func read(_ name: String, from spool: Spool) {
        self.spools[name] = spool
    }

    /// The input named `name` is read from the file at `path` (a spool written whole).
    public mutating func read(_ name: String, from path: String) {
        self.spools[name] = Spool(path: path)
    }

    /// The file to open for the input `name`: its spool, else `name` itself.
    public func path(of name: String) -> String {
        self.spools[name]?.path ?? name
    }

    /// The growing input of `name`'s spool, when the spool is still being written.
    public func growing(of name: String) -> GrowingInput? {
        self.spools[name]?.growing
    }

    /// Whether no input has a spool.
    public var isEmpty: Bool { self.spools.isEmpty }
}
