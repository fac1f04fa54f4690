/// Carries a value across a `@Sendable` boundary that Dispatch requires, where the value is in fact
/// only used on one serial queue (named at each use).
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
