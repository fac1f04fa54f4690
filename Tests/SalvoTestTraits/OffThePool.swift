import Dispatch
import Testing

/// Runs each test of a suite on Dispatch threads instead of the Swift concurrency pool.
///
/// The pool has one thread per core (two on a small CI machine), and Swift Testing runs synchronous tests on it:
/// a test that blocks — on a semaphore while a TLS transfer runs, or on a child process — holds one of those few
/// threads, and every other test's `await`s wait behind it (a 20-millisecond sleep wakes seconds late, and a
/// test that meant to interrupt a job finds it finished). With this trait the blocking happens on a thread of
/// Dispatch's, which grows its pool when threads block, and the concurrency pool stays free for the rest.
public struct OffThePoolTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil else { return try await function() }
        try await DispatchTaskExecutor.run(function)
    }
}

extension Trait where Self == OffThePoolTrait {
    /// Each test runs on Dispatch threads, not the concurrency pool (`OffThePoolTrait`).
    public static var offThePool: Self { OffThePoolTrait() }
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
