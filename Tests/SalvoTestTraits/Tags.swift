import Foundation
import Testing

/// What a test needs besides the process it runs in. Every suite carries one of these tags and the matching
/// `.runs(_:)` condition, so that a change can be checked by the fast set first:
/// `SALVO_TEST_TAGS=pure swift test` runs the tests that touch no socket and start no process. (`swift test
/// --filter` matches names, not tags; the environment variable is what selects by tag on the command line.)
extension Tag {
    /// Values and state machines only: no socket, no child process, no server (files in a scratch folder allowed).
    @Tag public static var pure: Self
    /// Real TLS or TCP on 127.0.0.1: the simulator, a loopback or hostile server, PostgreSQL.
    @Tag public static var network: Self
    /// Runs the `salvo` executable (or another program) as a child process.
    @Tag public static var process: Self
}

/// The kinds `SALVO_TEST_TAGS` selects (comma-separated: `pure`, `network`, `process`); every kind when unset.
public enum TestKind: String, Sendable, CaseIterable {
    case pure
    case network
    case process

    /// The kinds this test process runs.
    public static let selected: Set<TestKind> = {
        guard let list = ProcessInfo.processInfo.environment["SALVO_TEST_TAGS"], !list.isEmpty else {
            return Set(TestKind.allCases)
        }
        let names = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let kinds = names.compactMap(TestKind.init(rawValue:))
        precondition(
            kinds.count == names.count,
            "SALVO_TEST_TAGS=\(list): each name must be one of \(TestKind.allCases.map(\.rawValue))"
        )
        return Set(kinds)
    }()
}

extension Trait where Self == ConditionTrait {
    /// Runs the suite when `SALVO_TEST_TAGS` selects `kind` (or is unset).
    public static func runs(_ kind: TestKind) -> Self {
        .enabled(if: TestKind.selected.contains(kind), "SALVO_TEST_TAGS leaves out the \(kind.rawValue) tests")
    }
}
