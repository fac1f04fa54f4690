import NIOCore
import NIOPosix

/// The one place where Salvo's blocking work runs when `async` code needs it done: file I/O and `fsync`, waits on a
/// semaphore or a condition, a whole input read to its end. Swift's cooperative pool has one thread per core (two on
/// the machines Salvo runs on); a blocking call there stalls every task of the process, a server's requests and
/// watchdogs included. `async` functions call blocking code through `run`, never directly.
///
/// A pool of its own (NIO's `NIOThreadPool`, started once and kept for the process), bounded at `threads`: enough
/// for the few long waits a process has at once (a journal's lock awaited, a query's rows streamed into a file)
/// beside the short writes, and no more threads than that however many callers queue. Work submitted always runs,
/// even for a cancelled task: an output or a journal's finish is never skipped half-way.
///
/// What runs here must not itself wait for other work submitted here (it could hold every thread). Hot paths never
/// come here: a shard's rows are read on its own serial queue, an HTTP/2 job's on its reader's queue.
public enum BlockingWork {
    /// The pool's threads: four, or twice the cores when that is more.
    public static let threads = max(4, 2 * System.coreCount)

    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        return pool
    }()

    /// Runs `body` on the pool and returns what it returned, or throws what it threw.
    public static func run<Value: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
            Self.pool.submit { _ in
                continuation.resume(returning: Result { () throws(Failure) -> Value in try body() })
            }
        }
        return try result.get()
    }
}
