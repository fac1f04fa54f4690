import SalvoBinary
import SalvoRows

extension CertificateFactory.Paths {
    /// The folder's client certificate and key (PEM), trusting the folder's CA: what a job connects to a test gateway
    /// with.
    public var clientCredentials: GatewayCredentials {
        GatewayCredentials(
            identity: .pem(certificateChainFile: self.client, privateKeyFile: self.clientKey),
            trustedCAFile: self.ca
        )
    }
}
