/// A problem with the user's input found while running (a file, a line, a value): printed as
/// `Error: <message>` with exit code 1, without the usage text that argument errors get.
struct UserError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
