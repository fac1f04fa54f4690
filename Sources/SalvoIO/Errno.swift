#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one funnel through which every system call result and every io_uring completion result passes:
/// retries `EINTR`, reports `EAGAIN`, and turns any other errno into a `SalvoIOError` with a code.
package enum Errno {
    /// How a result should be handled.
    package enum Outcome {
        /// The call succeeded with this (non-negative) value.
        case success(Int)
        /// The call would block or was interrupted: try again (later, for `EAGAIN`).
        case retry
        /// The call failed.
        case failure(SalvoIOError)
    }

    /// Runs `body` (a system call returning -1 and setting errno on failure), retrying `EINTR` a bounded
    /// number of times. `EAGAIN`/`EWOULDBLOCK` come back as `.retry` for the caller to wait on.
    static func call(_ name: StaticString, _ body: () -> Int) -> Outcome {
        for _ in 0..<1000 {
            let result = body()
            if result >= 0 {
                return .success(result)
            }
            let code = Glibc.errno
            if code == EINTR {
                continue
            }
            return classify(name, code)
        }
        return .failure(error(name, EINTR))
    }

    /// Like `call`, but throws instead of returning `.retry` (for calls that must not block).
    static func callOrThrow(_ name: StaticString, _ body: () -> Int) throws -> Int {
        switch call(name, body) {
        case .success(let value): return value
        case .retry: throw error(name, EAGAIN)
        case .failure(let error): throw error
        }
    }

    /// Interprets an io_uring completion: `res` is a value, or `-errno`.
    static func completion(_ name: StaticString, _ res: Int32) -> Outcome {
        if res >= 0 {
            return .success(Int(res))
        }
        if -res == EINTR {
            return .retry
        }
        return classify(name, -res)
    }

    /// Interprets a liburing call that returns `-errno` (not -1 with errno set).
    static func liburing(_ name: StaticString, _ res: Int32) throws -> Int {
        if res >= 0 {
            return Int(res)
        }
        throw error(name, -res)
    }

    private static func classify(_ name: StaticString, _ code: Int32) -> Outcome {
        if code == EAGAIN || code == EWOULDBLOCK {
            return .retry
        }
        return .failure(error(name, code))
    }

    /// The error for `errno == code` raised by `name`, with the most specific code known.
    static func error(_ name: StaticString, _ code: Int32) -> SalvoIOError {
        let text = String(cString: strerror(code))
        switch code {
        case ECONNRESET, EPIPE:
            return SalvoIOError(.connectionReset, "\(name): the peer reset the connection (\(text))", errno: code)
        case ECONNREFUSED:
            return SalvoIOError(
                .connectionRefused,
                "\(name): connection refused (\(text)); is the server listening?",
                errno: code
            )
        case ETIMEDOUT:
            return SalvoIOError(.timedOut, "\(name): \(text)", errno: code)
        default:
            return SalvoIOError(.systemCall, "\(name) failed: \(text) (errno \(code))", errno: code)
        }
    }
}
