@_exported import SalvoDevelopment

extension CertificateFactory {
    /// `shared`, written once per process into the process's `TestScratch` folder (clients for `sharedTopic`), which
    /// is removed with its private keys when the process exits: for tests and benchmarks that need certificate files.
    public static let sharedFolder: Paths = {
        do {
            return try CertificateFactory.shared.write(to: TestScratch.path + "/certificates", topic: sharedTopic)
        } catch {
            fatalError("cannot make the shared test certificates: \(error)")
        }
    }()
}
