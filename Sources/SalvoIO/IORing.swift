internal import CLiburing
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Something that has operations in flight on an `IORing` and wants their completions.
protocol IORingCompletionTarget: AnyObject {
    /// One operation of this target finished; `result` is the raw `cqe.res` (a value or `-errno`).
    func ringDidComplete(operation: IORing.Operation, result: Int32)
}

/// An io_uring instance owned by one serial DispatchQueue.
///
/// Completions wake the queue through an eventfd registered with the ring and watched by a
/// `DispatchSource` read source, so no thread ever blocks waiting for a completion. Operations are
/// tagged with a target slot and an operation kind in `user_data`; no allocation per operation.
///
/// Confinement: every method must be called on `queue` (`@unchecked Sendable` for that reason).
/// `IORING_SETUP_SINGLE_ISSUER` is deliberately not used: Dispatch runs the queue on varying threads.
final class IORing: @unchecked Sendable {
    /// The kind of an operation, stored in the low byte of `user_data`.
    enum Operation: UInt8 {
        case send = 1
        case receive = 2
        case cancel = 3
    }

    let queue: DispatchQueue
    private let ring: UnsafeMutablePointer<io_uring>
    private let eventFD: Int32
    private var source: DispatchSourceRead?
    // Registered targets; a slot keeps its target alive until `unregister`, which the target calls only
    // once none of its operations is in flight, so no completion can reach a freed buffer.
    private var targets: [IORingCompletionTarget?] = []
    private var freeSlots: [Int] = []
    private var harvested: [(UInt64, Int32)] = []
    private let batch: UnsafeMutablePointer<UnsafeMutablePointer<io_uring_cqe>?>
    private let batchCapacity = 128

    /// Sets up a ring with `entries` submission slots and hooks its eventfd to `queue`.
    /// Throws `.ioUringUnavailable` when the kernel (or a seccomp filter) refuses io_uring.
    init(queue: DispatchQueue, entries: UInt32 = 256) throws {
        self.queue = queue
        ring = .allocate(capacity: 1)
        ring.initialize(to: io_uring())
        let rc = io_uring_queue_init(entries, ring, 0)
        if rc < 0 {
            ring.deallocate()
            throw SalvoIOError(
                .ioUringUnavailable,
                "io_uring_queue_init refused: \(String(cString: strerror(-rc))) (errno \(-rc)); "
                    + "use the socket transport or allow io_uring (kernel.io_uring_disabled, seccomp)",
                errno: -rc
            )
        }
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        if fd < 0 {
            let code = Glibc.errno
            io_uring_queue_exit(ring)
            ring.deallocate()
            throw Errno.error("eventfd", code)
        }
        let registered = io_uring_register_eventfd(ring, fd)
        if registered < 0 {
            close(fd)
            io_uring_queue_exit(ring)
            ring.deallocate()
            throw SalvoIOError(
                .ioUringUnavailable,
                "io_uring_register_eventfd failed: \(String(cString: strerror(-registered)))",
                errno: -registered
            )
        }
        eventFD = fd
        batch = .allocate(capacity: batchCapacity)
        harvested.reserveCapacity(batchCapacity)

        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        let ringPointer = ring
        let batchPointer = batch
        source.setEventHandler { [weak self] in
            self?.drainCompletions()
        }
        // The ring and the eventfd outlive every event handler: they are released in the cancel handler.
        source.setCancelHandler {
            close(fd)
            io_uring_queue_exit(ringPointer)
            ringPointer.deallocate()
            batchPointer.deallocate()
        }
        self.source = source
        source.resume()
    }

    deinit {
        source?.cancel()
    }

    /// Adds a target and returns its slot, to be passed to the `prepare…` calls.
    func register(_ target: IORingCompletionTarget) -> Int {
        dispatchPrecondition(condition: .onQueue(queue))
        if let slot = freeSlots.popLast() {
            targets[slot] = target
            return slot
        }
        targets.append(target)
        return targets.count - 1
    }

    /// Releases a slot. Call only when none of the target's send/receive operations is in flight.
    func unregister(slot: Int) {
        dispatchPrecondition(condition: .onQueue(queue))
        targets[slot] = nil
        freeSlots.append(slot)
    }

    /// Queues an `IORING_OP_SEND` of `count` bytes at `bytes`; the memory must stay valid until completion.
    func send(slot: Int, fd: Int32, bytes: UnsafeRawPointer, count: Int) throws {
        let sqe = try nextSQE()
        io_uring_prep_send(sqe, fd, bytes, count, Socket.noSignal)
        io_uring_sqe_set_data64(sqe, Self.userData(slot: slot, operation: .send))
        try submit()
    }

    /// Queues an `IORING_OP_RECV` into `buffer`; the memory must stay valid until completion.
    func receive(slot: Int, fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int) throws {
        let sqe = try nextSQE()
        io_uring_prep_recv(sqe, fd, buffer, count, 0)
        io_uring_sqe_set_data64(sqe, Self.userData(slot: slot, operation: .receive))
        try submit()
    }

    /// Asks the kernel to cancel an in-flight operation; it then completes with `-ECANCELED`.
    func cancel(slot: Int, operation: Operation) throws {
        let sqe = try nextSQE()
        io_uring_prep_cancel64(sqe, Self.userData(slot: slot, operation: operation), 0)
        io_uring_sqe_set_data64(sqe, Self.userData(slot: slot, operation: .cancel))
        try submit()
    }

    private static func userData(slot: Int, operation: Operation) -> UInt64 {
        (UInt64(slot) << 8) | UInt64(operation.rawValue)
    }

    private func nextSQE() throws -> UnsafeMutablePointer<io_uring_sqe> {
        dispatchPrecondition(condition: .onQueue(queue))
        if let sqe = io_uring_get_sqe(ring) {
            return sqe
        }
        // The submission queue is full: push what is queued to the kernel and try once more.
        try submit()
        guard let sqe = io_uring_get_sqe(ring) else {
            throw SalvoIOError(.systemCall, "io_uring submission queue full")
        }
        return sqe
    }

    private func submit() throws {
        for _ in 0..<100 {
            let rc = io_uring_submit(ring)
            if rc >= 0 {
                return
            }
            // EINTR: interrupted; EAGAIN/EBUSY: the completion queue is momentarily full. Reap and retry.
            if -rc == EINTR || -rc == EAGAIN || -rc == EBUSY {
                drainCompletions()
                continue
            }
            throw Errno.error("io_uring_submit", -rc)
        }
        throw Errno.error("io_uring_submit", EBUSY)
    }

    /// Reads the eventfd (re-arming it), then hands every completion to its target.
    private func drainCompletions() {
        dispatchPrecondition(condition: .onQueue(queue))
        var counter: UInt64 = 0
        _ = read(eventFD, &counter, 8)
        // Bounded: at most this many batches per wake-up. Completions posted before the eventfd was read do
        // not signal it again, so if any are left the drain continues on a fresh turn of the queue.
        for _ in 0..<64 {
            let count = Int(io_uring_peek_batch_cqe(ring, batch, UInt32(batchCapacity)))
            if count == 0 {
                return
            }
            // Copy out first and advance, so handlers may submit (and even complete) new work freely.
            harvested.removeAll(keepingCapacity: true)
            for index in 0..<count {
                let cqe = batch[index]!
                harvested.append((cqe.pointee.user_data, cqe.pointee.res))
            }
            io_uring_cq_advance(ring, UInt32(count))
            for (userData, result) in harvested {
                guard let operation = Operation(rawValue: UInt8(truncatingIfNeeded: userData)) else { continue }
                if operation == .cancel {
                    continue
                }
                let slot = Int(userData >> 8)
                if slot < targets.count, let target = targets[slot] {
                    target.ringDidComplete(operation: operation, result: result)
                }
            }
        }
        if io_uring_cq_ready(ring) > 0 {
            queue.async { [weak self] in self?.drainCompletions() }
        }
    }
}
