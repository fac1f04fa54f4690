import Dispatch
import Foundation
import Synchronization
import Testing

/// Lets a few suites that open sockets or start processes run at once, the others waiting for a turn.
///
/// Swift Testing starts every suite at once. On two cores a hundred suites of TLS jobs, simulators and child
/// processes then share the CPU, and the bounds those suites put on their own waits (a job that must end within
/// 30 s, a time limit of a minute, a soak's round count in its fixed time) measure the crowd instead of the code.
/// A suite with this trait waits for a turn before its first test starts and gives it back after its last, so its
/// tests' time limits and clocks start with the turn; at most `Turns.count` such suites run together (the
/// environment variable `SALVO_TEST_TURNS` sets it; 2 per core when unset). Suites of values and state machines
/// (`.pure`) take no turn and run beside them, on the concurrency pool; a suite in its turn runs on Dispatch threads
/// (`DispatchTaskExecutor`), so that its awaits resume without queueing behind the pure suites' synchronous tests, and
/// its tests that block hold no thread of the pool.
///
/// Measured on two cores (`swift test`, every kind, PostgreSQL up), each network and process test's time against the
/// same test's time in a run of one suite at a time (`--no-parallel`): every suite at once, median 23× and one in ten
/// over 139× (tests of 0.3 s taking 49 s); with turns, median 2.2× and one in ten over 4.9×.
public struct TurnTrait: SuiteTrait, TestScoping {
    /// On the suite only: its tests run inside the suite's turn, and a test waiting for a turn its own suite holds
    /// would never get one.
    public var isRecursive: Bool { false }

    public func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        guard test.isSuite, testCase == nil else { return try await function() }
        await Turns.shared.take()
        defer { Turns.shared.give() }
        try await DispatchTaskExecutor.run(function)
    }
}

extension Trait where Self == TurnTrait {
    /// The suite waits for a turn among the few heavy suites that run at once (`TurnTrait`).
    public static var takesATurn: Self { TurnTrait() }
}

/// A counting semaphore for tasks, first come first served.
final class Turns: Sendable {
    static let shared = Turns(count: Turns.count)

    /// How many suites with `.takesATurn` run at once: `SALVO_TEST_TURNS`, or 2 per core.
    static var count: Int {
        if let text = ProcessInfo.processInfo.environment["SALVO_TEST_TURNS"] {
            guard let value = Int(text), value > 0 else {
                preconditionFailure("SALVO_TEST_TURNS=\(text): a count of suites, 1 or more")
            }
            return value
        }
        return 2 * max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(count: Int) { self.state = Mutex(State(free: count)) }

    func take() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = self.state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func give() {
        let next = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// A task executor that runs each job on a Dispatch global-queue thread.
final class DispatchTaskExecutor: TaskExecutor {
    static let shared = DispatchTaskExecutor()

    /// Runs `function`, and the child tasks it starts, on Dispatch threads.
    static func run(_ function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(Self.shared) { try await function() }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
