import Foundation
import SalvoBinary
import SalvoRows

/// What a journal folder proves (`salvo journal verify DIR`): its manifest, its state file's header, how many rows are
/// in each state, the bytes that are not states (with the file offsets of the first few), and who holds it now. A
/// reading only: the folder is neither locked nor changed, so it can be run beside a job that holds it.
public struct JournalVerification: Sendable {
    /// What was found, a line each, for a person.
    public var lines: [String] = []
    /// What is wrong; empty when the journal can be trusted.
    public var problems: [String] = []
    /// Who holds the journal now, nil when no run does.
    public var holder: String?
    /// The state file's check, when there is a state file.
    public var check: RowJournalCheck?

    public var isIntact: Bool { self.problems.isEmpty }

    /// The names of the row states, in `RowState.rawValue` order.
    static let stateNames = [
        "none (never sent)", "written (uncertain)", "confirmed", "presumed", "rejected", "expired",
    ]

    public init(_ directory: String) {
        self.holder = JournalLock.holder(directory)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            self.problems.append("\(directory) is not a folder")
            self.lines.append("damaged: no journal: \(directory) is not a folder")
            return
        }
        let manifest: JournalManifest?
        do {
            manifest = try JobJournal.loadManifest(directory)
        } catch {
            manifest = nil
            self.problems.append("\(JobJournal.manifestPath(directory)) cannot be read: it is damaged")
        }
        let statePath = JobJournal.statePath(directory)
        let state = FileManager.default.contents(atPath: statePath)
        if let manifest {
            self.describe(manifest, directory: directory)
        } else if self.problems.isEmpty {
            self.lines.append("manifest: none (no job.json: a send starts a new job here)")
            // A job's manifest is written before its first row is sent: a state file without one held no sent row.
            if state != nil {
                self.lines.append("state file: \(statePath) without a manifest (no row was sent with it): replaced")
            }
        }
        let current = manifest.map { $0.version == JournalManifest.currentVersion } ?? true
        if let state, current, manifest != nil || !self.problems.isEmpty {
            self.verify(state, path: statePath, manifest: manifest)
        } else if state == nil, let manifest, manifest.finish == nil, current {
            self.problems.append("\(statePath) is missing: the job is unfinished and its rows' states are gone")
        }
        self.lines.append("lock: " + (self.holder.map { "held by \($0)" } ?? "not held (no run has the journal now)"))
        if self.isIntact {
            switch manifest {
            case nil: self.lines.append("verdict: intact, and empty: a send starts a new job here")
            case .some(let manifest) where manifest.finish != nil:
                self.lines.append("verdict: intact; the job is finished (a run of it reports it and sends nothing)")
            default:
                self.lines.append(
                    "verdict: intact; the rows' states can be trusted (a run of the same command resumes the job)"
                )
            }
        } else {
            self.lines += self.problems.map { "damaged: \($0)" }
            let trusted =
                manifest != nil && self.problems.allSatisfy { !$0.hasPrefix(JobJournal.manifestPath(directory)) }
                ? "The manifest (inputs, options, runs) can be read; the rows' states cannot be trusted, so a run "
                    + "refuses the journal and sends nothing. "
                : "Nothing in it can be trusted, so a run refuses the journal and sends nothing. "
            self.lines.append(
                "verdict: damaged. " + trusted + "Run the job with --journal-restart to begin it again in this "
                    + "folder: rows already delivered may be sent again"
            )
        }
    }

    private mutating func describe(_ manifest: JournalManifest, directory: String) {
        let inputs = manifest.inputs.map { "\($0.path) (\($0.bytes) bytes)" }.joined(separator: ", ")
        let finish = manifest.finish.map { "finished, exit status \($0.exitStatus)" } ?? "unfinished"
        self.lines.append(
            "manifest: journal version \(manifest.version), job \(manifest.job ?? "(none)"), \(manifest.runs) "
                + "run\(manifest.runs == 1 ? "" : "s"), \(finish); inputs \(inputs)"
        )
        if manifest.version != JournalManifest.currentVersion {
            self.problems.append(
                "the journal is of version \(manifest.version), this build's is \(JournalManifest.currentVersion): "
                    + "this build does not read its state file"
            )
        } else if manifest.job.flatMap(JournalJobID.init(hex:)) == nil {
            self.problems.append("\(JobJournal.manifestPath(directory)) names no job id")
        }
    }

    private mutating func verify(_ state: Data, path: String, manifest: JournalManifest?) {
        let rows = manifest.map { RowJournalCheck.rowCount($0.lineCounts) }
        let job = manifest?.job.flatMap(JournalJobID.init(hex:))
        let check = state.withUnsafeBytes { RowJournalCheck($0, rows: rows, job: job) }
        self.check = check
        if let header = check.header {
            self.lines.append(
                "state file: \(path), \(state.count) bytes; header: layout \(header.layout), job \(header.job), "
                    + "\(header.rows) rows"
            )
        } else {
            self.lines.append("state file: \(path), \(state.count) bytes; no header")
        }
        let counts = zip(Self.stateNames, check.stateCounts).map { "\($1) \($0)" }.joined(separator: ", ")
        self.lines.append("rows: \(counts)" + (check.badBytes > 0 ? ", \(check.badBytes) not a state" : ""))
        self.problems += check.problems.map { "\(path): \($0)" }
    }
}
