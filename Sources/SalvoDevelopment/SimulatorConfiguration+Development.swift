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
