import APNSWire
import Foundation
import Hummingbird
import HummingbirdAuth
import NIOCore
import SalvoCampaigns
import SalvoService

/// The console's routes: `/` (the overview) and `/console/…`: its sign-in form (`login`, `logout`), its one-time links
/// (`sessions`, `enter/{token}`), a campaign's page (`campaigns/{id}`) and its stylesheet. Pages are read-only HTML;
/// a request without a session or a bearer key is sent to the sign-in form. Not operations of the API, so not in its
/// OpenAPI document.
extension ServiceResponder {
    /// `/` and every path under `/console/`.
    static func isConsolePath(_ path: [Substring]) -> Bool {
        path.isEmpty || path[0] == "console"
    }

    /// The Content-Security-Policy of every console answer: nothing but the console's own stylesheet, no script,
    /// forms only to itself, never in a frame.
    static let consolePolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        + "base-uri 'none'"

    func console(_ console: Console, path: [Substring], request: Request, context: Context) async -> Response {
        let route = path.dropFirst().map(String.init)
        let methods: [HTTPRequest.Method]
        switch route.count {
        case 0 where path.isEmpty: methods = [.get]
        case 1 where ["console.css"].contains(route[0]): methods = [.get]
        case 1 where route[0] == "login": methods = [.get, .post]
        case 1 where ["logout", "sessions"].contains(route[0]): methods = [.post]
        case 2 where ["enter", "campaigns"].contains(route[0]): methods = [.get]
        default:
            return Self.html(404, ConsolePages.notFound("There is no page \(request.uri.path) in the console."))
        }
        guard methods.contains(request.method) else {
            var response = Self.html(405, ConsolePages.notFound("\(request.uri.path) takes \(methods[0].rawValue)."))
            response.headers[.allow] = methods.map(\.rawValue).joined(separator: ", ")
            return response
        }
        let origin = ConsoleOrigin(
            method: request.method.rawValue,
            fetchSite: request.headers[.init("Sec-Fetch-Site")!],
            origin: request.headers[.origin],
            host: request.head.authority
        )
        guard origin.allowed else {
            return Self.html(403, ConsolePages.refused("The console's forms are taken from its own pages only."))
        }
        switch (route.first ?? "", request.method) {
        case ("console.css", _):
            var response = Response(
                status: .ok,
                body: ResponseBody(byteBuffer: ByteBuffer(string: ConsolePages.stylesheet))
            )
            response.headers[.contentType] = "text/css; charset=utf-8"
            response.headers[.cacheControl] = "max-age=300"
            return response
        case ("login", .get):
            return Self.html(200, ConsolePages.login(message: nil))
        case ("login", _):
            return await self.consoleLogin(console, request: request, context: context)
        case ("logout", _):
            if let token = request.cookies[Console.cookieName]?.value {
                console.sessions.withLockedValue { $0.close(token) }
            }
            var response = Self.redirect("/console/login")
            response.setCookie(Self.cookie(console, value: "", maxAge: 0))
            return response
        case ("sessions", _):
            return await self.consoleEntry(console, request: request)
        case ("enter", _):
            let now = self.service.configuration.now()
            guard let keyID = console.sessions.withLockedValue({ $0.takeEntry(route[1], now: now) }),
                await self.service.isActiveKey(id: keyID)
            else {
                return Self.html(401, ConsolePages.login(message: "That link was used already, or has expired."))
            }
            let then = request.uri.queryParameters["then"].map(String.init).flatMap(Self.consoleTarget) ?? "/"
            return self.signedIn(console, keyID: keyID, then: then, now: now)
        default:
            break
        }
        guard await self.consoleKey(console, request: request) != nil else {
            return Self.redirect("/console/login")
        }
        if route.first == "campaigns" {
            return await self.consoleCampaign(route[1])
        }
        return await self.consoleOverview()
    }

    // MARK: Signing in

    /// The key a console request carries: a bearer API key, or a session's cookie, each of an active key (a revoked
    /// key's sessions end).
    private func consoleKey(_ console: Console, request: Request) async -> String? {
        let keyID: String
        if let bearer = request.headers.bearer?.token {
            guard let id = await self.service.keyID(bearer: bearer) else { return nil }
            keyID = id
        } else if let token = request.cookies[Console.cookieName]?.value {
            let now = self.service.configuration.now()
            guard let id = console.sessions.withLockedValue({ $0.keyID(session: token, now: now) }) else { return nil }
            keyID = id
        } else {
            return nil
        }
        guard await self.service.isActiveKey(id: keyID) else {
            console.sessions.withLockedValue { $0.end(keyID: keyID) }
            return nil
        }
        return keyID
    }

    /// `POST /console/login` with the form's `key`: a session, or the form again saying why not.
    private func consoleLogin(_ console: Console, request: Request, context: Context) async -> Response {
        struct Form: Decodable {
            var key: String
        }
        let type = request.headers[.contentType]?.lowercased() ?? ""
        var request = request
        guard type.hasPrefix("application/x-www-form-urlencoded"),
            let body = try? await request.collectBody(upTo: 4096),
            let form = try? URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))
        else {
            return Self.html(400, ConsolePages.login(message: "The form needs an API key."))
        }
        let key = form.key.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let keyID = await self.service.keyID(bearer: key), await self.service.isActiveKey(id: keyID) else {
            return Self.html(401, ConsolePages.login(message: "That API key is not known, or was revoked."))
        }
        return self.signedIn(console, keyID: keyID, then: "/", now: self.service.configuration.now())
    }

    /// `POST /console/sessions` with a bearer key: a one-time link that opens a session within 60 seconds (for a
    /// browser that cannot send the header, such as a headless one), to `then` when it names a console page.
    private func consoleEntry(_ console: Console, request: Request) async -> Response {
        guard let bearer = request.headers.bearer?.token, let keyID = await self.service.keyID(bearer: bearer),
            await self.service.isActiveKey(id: keyID)
        else {
            var response = Self.problem(
                ServiceProblem(.unauthorized, detail: "a console link needs an Authorization: Bearer <API key> header")
            )
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        var then = "/"
        if let given = request.uri.queryParameters["then"].map(String.init) {
            guard let target = Self.consoleTarget(given) else {
                return Self.problem(
                    ServiceProblem(
                        .badRequest,
                        detail: "then is a console page: / or /console/campaigns/{id}, not \(given)",
                        field: "then"
                    )
                )
            }
            then = target
        }
        let token = Console.newToken()
        let now = self.service.configuration.now()
        let grant = console.sessions.withLockedValue { $0.addEntry(token, keyID: keyID, now: now) }
        let url = "/console/enter/\(token)" + (then == "/" ? "" : "?then=\(then)")
        var response = Self.json(
            201,
            .object([
                JSONMember("url", .string(url)),
                JSONMember("expires_at", .string(ServiceJSON.time(grant.expiresAt))),
            ])
        )
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// A console page a link may lead to: `/` or a campaign's page.
    static func consoleTarget(_ path: String) -> String? {
        if path == "/" { return path }
        let prefix = "/console/campaigns/"
        guard path.hasPrefix(prefix), APNSRequestHeaders.isCanonicalUUID(String(path.dropFirst(prefix.count))) else {
            return nil
        }
        return path
    }

    private func signedIn(_ console: Console, keyID: String, then: String, now: Int64) -> Response {
        let token = Console.newToken()
        _ = console.sessions.withLockedValue { $0.open(token, keyID: keyID, now: now) }
        var response = Self.redirect(then)
        response.setCookie(
            Self.cookie(console, value: token, maxAge: Int(ConsoleSessions.lifetime / 1000))
        )
        return response
    }

    private static func cookie(_ console: Console, value: String, maxAge: Int) -> Cookie {
        Cookie(
            name: Console.cookieName,
            value: value,
            maxAge: maxAge,
            path: "/",
            secure: console.secureCookie,
            httpOnly: true,
            sameSite: .strict
        )
    }

    // MARK: Pages

    private func consoleOverview() async -> Response {
        let now = self.service.configuration.now()
        var campaigns: [(campaign: JSONValue, perSecond: [Int])] = []
        if let runner = self.campaigns {
            for status in await runner.list() {
                let perSecond = runner.rates(status.record.id)?.perSecond(last: 300, before: now) ?? []
                campaigns.append((CampaignJSON.campaign(status, now: now), perSecond))
            }
        }
        let webhooks = (try? await self.webhooks?.status())?.map(ServiceJSON.webhook) ?? []
        let overview = ConsoleOverview(
            now: now,
            depth: self.service.depth,
            activity: self.service.activity,
            campaigns: campaigns,
            webhooks: webhooks
        )
        return Self.html(200, ConsolePages.overview(overview))
    }

    private func consoleCampaign(_ given: String) async -> Response {
        let id = given.lowercased()
        guard APNSRequestHeaders.isCanonicalUUID(id), let runner = self.campaigns,
            let status = await runner.status(id)
        else {
            return Self.html(404, ConsolePages.notFound("There is no campaign \(given)."))
        }
        let now = self.service.configuration.now()
        let perSecond = runner.rates(id)?.perSecond(last: 3600, before: now) ?? []
        return Self.html(
            200,
            ConsolePages.campaign(CampaignJSON.campaign(status, now: now), perSecond: perSecond, now: now)
        )
    }

    // MARK: Answers

    static func html(_ status: Int, _ page: String) -> Response {
        var response = Response(status: .init(code: status), body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
        response.headers[.contentType] = "text/html; charset=utf-8"
        response.headers[.contentSecurityPolicy] = Self.consolePolicy
        response.headers[.cacheControl] = "no-store"
        response.headers[.init("X-Content-Type-Options")!] = "nosniff"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        return response
    }

    static func redirect(_ location: String) -> Response {
        var response = Response(status: .seeOther)
        response.headers[.location] = location
        response.headers[.cacheControl] = "no-store"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        return response
    }
}
