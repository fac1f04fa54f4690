import Testing

/// Polls `condition` until it holds or `timeout` passes: true when it held. On a timeout an issue is recorded at the
/// caller, saying what was waited for (`description`) and for how long.
///
/// The pause between polls starts at 1 ms and doubles up to `every` (50 ms unless told): a condition that holds at
/// once costs nothing, one that takes seconds is polled twenty times a second. A test that acts the moment the
/// condition holds (a kill mid-flight) asks for a shorter `every`.
@discardableResult
public func eventually(
    _ description: @autoclosure () -> String,
    timeout: Duration,
    every: Duration = .milliseconds(50),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var pause = min(Duration.milliseconds(1), every)
    while true {
        if try await condition() { return true }
        if clock.now >= deadline { break }
        try await Task.sleep(for: min(pause, deadline - clock.now))
        pause = min(pause * 2, every)
    }
    Issue.record("not within \(timeout): \(description())", sourceLocation: sourceLocation)
    return false
}
