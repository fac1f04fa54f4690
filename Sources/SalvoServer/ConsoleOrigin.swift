/// Whether a request to the console's forms (sign in, sign out) may be one a page of another site made the browser
/// send (cross-site request forgery): refused when the browser says so. Browsers name where a request came from in
/// `Sec-Fetch-Site` (every current one) or, for a POST, in `Origin`; a request with neither is not from a browser's
/// form on another site. Stateless, so the forms need no hidden token: the rule of Go's
/// `net/http.CrossOriginProtection` and of the Fetch Metadata guidance, written here as it is four comparisons.
struct ConsoleOrigin: Sendable {
    var method: String
    /// `Sec-Fetch-Site`: `same-origin`, `same-site`, `cross-site` or `none` (typed in, a bookmark).
    var fetchSite: String?
    /// `Origin`: `scheme://host[:port]`, or `null`.
    var origin: String?
    /// `Host` (HTTP/1.1) or `:authority`.
    var host: String?

    /// True when the request may go on.
    var allowed: Bool {
        if ["GET", "HEAD", "OPTIONS"].contains(self.method) { return true }
        if let site = self.fetchSite?.lowercased() { return site == "same-origin" || site == "none" }
        guard let origin = self.origin else { return true }
        guard let host = self.host?.lowercased(), !host.isEmpty,
            let separator = origin.range(of: "://")
        else { return false }
        return origin[separator.upperBound...].lowercased() == host
    }
}
