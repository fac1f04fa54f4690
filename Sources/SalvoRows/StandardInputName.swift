/// The input file name `-`: standard input, once it is spooled into a regular file.
///
/// A job reads its input more than once and by offset (the binary interface rewinds to a failed identifier and
/// reads those rows again; `TokenSource` keeps one descriptor per file and reads at offsets), which a pipe cannot
/// do. So the command line copies standard input into a file first (`StandardInputSpool`) and names that file in the
/// request's `InputSpools`. Every list of files keeps the name `-`: it is what the rejects' `file` column, the
/// unsettled file, the report's input files, the journal's manifest and every message show.
public enum StandardInputName {
    /// How a command line names standard input among its input files.
    public static let name = "-"

    /// How messages name it where `-` alone would read oddly.
    public static let described = "(standard input)"
}
