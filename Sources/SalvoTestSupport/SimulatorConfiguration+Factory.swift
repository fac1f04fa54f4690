import SalvoSimulator

extension SimulatorConfiguration {
    /// A simulator on free loopback ports serving `certificates`' server identity, with `plan` and a ledger
    /// sized for tests (`maximumTokens`).
    public static func testing(
        _ certificates: CertificateFactory,
        plan: FaultPlan = FaultPlan(),
        maximumTokens: Int = 100_000
    ) -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.plan = plan
        configuration.maximumTokens = maximumTokens
        return configuration
    }
}
