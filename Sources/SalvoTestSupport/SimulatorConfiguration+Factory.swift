import SalvoSimulator

extension SimulatorConfiguration.TLS {
    /// The factory's server identity, and its CA as the one client certificates must chain to.
    public init(_ certificates: CertificateFactory) {
        self.init(
            certificatePEM: certificates.server.certificatePEM,
            privateKeyPEM: certificates.server.privateKeyPEM,
            clientCAPEM: certificates.ca.certificatePEM
        )
    }

    /// The server, its key and the CA from a folder the factory wrote.
    public init(paths: CertificateFactory.Paths) throws(SimulatorError) {
        try self.init(certificateFile: paths.server, privateKeyFile: paths.serverKey, clientCAFile: paths.ca)
    }
}

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
