import CPoolHold

/// What this test process did to Swift's cooperative pool.
public enum CooperativePool {
    /// Whether every job of the global executor runs on one thread (`SALVO_TEST_ONE_POOL_THREAD=1`, see
    /// `Tests/CPoolHold`): then a task that blocks its thread stalls every other task of the process, and a test that
    /// needs another task to go on meanwhile fails instead of passing on the second thread of a two-core machine.
    public static var isHeldToOneThread: Bool { salvo_pool_held_to_one_thread() }
}
