import APNSWire
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import SalvoService
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoServer

/// The console's doors through Hummingbird without a socket: without a session `/` sends a browser to the sign-in
/// form while `/v1/` keeps its 401 problem; the form opens a session in an `HttpOnly; SameSite=Strict` cookie; a
/// one-time link works once; a revoked key's session ends; every page carries a strict Content-Security-Policy; and
/// without a console those paths are 404.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct ConsoleRoutesTests {
    private static let logger = Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })

    private func withService(
        console: Bool,
        _ body: (Application<ServiceResponder>, SQLiteNotificationStore, (key: String, id: String)) async throws -> Void
    ) async throws {
        let setup = try await ServiceSimulator.start()
        let store = try await SQLiteNotificationStore.open(directory: try scratchFolder("console-routes"))
        let service = try await NotificationService.start(configuration: setup.configuration, store: store)
        let (key, record) = APIKeys.make(name: "console", now: 1)
        try await store.addAPIKey(record)
        let responder = ServiceResponder(
            service: service,
            console: console ? Console(secureCookie: true) : nil,
            document: [],
            metricsText: { "" },
            logger: Self.logger
        )
        do {
            try await body(Application(responder: responder), store, (key, record.id))
        } catch {
            await service.shutdown()
            try await setup.simulator.shutdown()
            throw error
        }
        await service.shutdown()
        try await setup.simulator.shutdown()
    }

    /// The session cookie's `name=value` of an answer's `Set-Cookie`, and the whole header.
    private static func cookie(_ response: TestResponse) -> (pair: String, header: String)? {
        guard let header = response.headers[.setCookie], header.hasPrefix(Console.cookieName + "=") else { return nil }
        return (String(header.prefix { $0 != ";" }), header)
    }

    @Test func aBrowserSignsInWithTheFormAndTheAPIKeepsItsProblem() async throws {
        try await self.withService(console: true) { app, store, key in
            try await app.test(.router) { client in
                try await client.execute(uri: "/", method: .get) {
                    #expect($0.status == .seeOther)
                    #expect($0.headers[.location] == "/console/login")
                }
                try await client.execute(uri: "/console/campaigns/\(UUID().uuidString)", method: .get) {
                    #expect($0.status == .seeOther)
                }
                try await client.execute(uri: "/v1/webhooks", method: .get) {
                    #expect($0.status == .unauthorized)
                    #expect($0.headers[.contentType] == "application/problem+json")
                }
                try await client.execute(uri: "/console/login", method: .get) {
                    #expect($0.status == .ok)
                    #expect($0.headers[.contentType] == "text/html; charset=utf-8")
                    #expect($0.headers[.contentSecurityPolicy] == ServiceResponder.consolePolicy)
                    #expect(String(buffer: $0.body).contains("<form method=\"post\" action=\"/console/login\""))
                }
                let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
                try await client.execute(
                    uri: "/console/login",
                    method: .post,
                    headers: form,
                    body: ByteBuffer(string: "key=salvo_wrong")
                ) {
                    #expect($0.status == .unauthorized)
                    #expect($0.headers[.setCookie] == nil)
                    #expect(String(buffer: $0.body).contains("not known"))
                }
                // The right key, from another site's page: refused, and no session.
                for crossSite: HTTPFields in [
                    [.contentType: "application/x-www-form-urlencoded", .init("Sec-Fetch-Site")!: "cross-site"],
                    [.contentType: "application/x-www-form-urlencoded", .origin: "https://evil.example"],
                ] {
                    try await client.execute(
                        uri: "/console/login",
                        method: .post,
                        headers: crossSite,
                        body: ByteBuffer(string: "key=\(key.key)")
                    ) {
                        #expect($0.status == .forbidden)
                        #expect($0.headers[.setCookie] == nil)
                    }
                }
                let session = try await client.execute(
                    uri: "/console/login",
                    method: .post,
                    headers: [
                        .contentType: "application/x-www-form-urlencoded", .init("Sec-Fetch-Site")!: "same-origin",
                    ],
                    body: ByteBuffer(string: "key=\(key.key)")
                ) { response -> String in
                    #expect(response.status == .seeOther && response.headers[.location] == "/")
                    let cookie = try #require(Self.cookie(response))
                    for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/", "Max-Age=28800"] {
                        #expect(cookie.header.contains(attribute), "\(cookie.header)")
                    }
                    #expect(!cookie.header.contains(key.key), "the cookie holds a token, never the key")
                    return cookie.pair
                }
                try await client.execute(uri: "/", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .ok)
                    #expect($0.headers[.contentSecurityPolicy] == ServiceResponder.consolePolicy)
                    let page = String(buffer: $0.body)
                    #expect(page.contains("id=\"queue-depth\" data-value=\"0\""))
                    #expect(!page.contains("<script"))
                }
                // A bearer key works too; the API does not take the cookie.
                try await client.execute(uri: "/", method: .get, headers: [.authorization: "Bearer \(key.key)"]) {
                    #expect($0.status == .ok)
                }
                try await client.execute(uri: "/v1/webhooks", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .unauthorized)
                }
                try await client.execute(uri: "/console/nowhere", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .notFound)
                }
                try await client.execute(uri: "/console/login", method: .delete) {
                    #expect($0.status == .methodNotAllowed && $0.headers[.allow] == "GET, POST")
                }
                try await client.execute(uri: "/console/console.css", method: .get) {
                    #expect($0.status == .ok && $0.headers[.contentType] == "text/css; charset=utf-8")
                }
                // Signing out from another site's page is refused; from the console's, it ends the session.
                try await client.execute(
                    uri: "/console/logout",
                    method: .post,
                    headers: [.cookie: session, .init("Sec-Fetch-Site")!: "cross-site"]
                ) {
                    #expect($0.status == .forbidden)
                }
                try await client.execute(uri: "/", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .ok)
                }
                try await client.execute(uri: "/console/logout", method: .post, headers: [.cookie: session]) {
                    #expect($0.status == .seeOther && $0.headers[.location] == "/console/login")
                    #expect($0.headers[.setCookie]?.contains("Max-Age=0") == true)
                }
                try await client.execute(uri: "/", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .seeOther)
                }
                _ = store
            }
        }
    }

    @Test func aOneTimeLinkOpensASessionOnceAndARevokedKeysSessionEnds() async throws {
        try await self.withService(console: true) { app, store, key in
            try await app.test(.router) { client in
                try await client.execute(uri: "/console/sessions", method: .post) {
                    #expect($0.status == .unauthorized)
                }
                try await client.execute(
                    uri: "/console/sessions?then=https://elsewhere.example/",
                    method: .post,
                    headers: [.authorization: "Bearer \(key.key)"]
                ) {
                    #expect($0.status == .badRequest)
                }
                let campaign = "/console/campaigns/\(UUID().uuidString.lowercased())"
                let link = try await client.execute(
                    uri: "/console/sessions?then=\(campaign)",
                    method: .post,
                    headers: [.authorization: "Bearer \(key.key)"]
                ) { response -> String in
                    #expect(response.status == .created)
                    let value = try JSONValue.parse(Array(response.body.readableBytesView)).value
                    guard case .string(let url)? = value["url"] else { return "" }
                    #expect(!url.contains(key.key))
                    return url
                }
                #expect(link.hasPrefix("/console/enter/"))
                let session = try await client.execute(uri: link, method: .get) { response -> String in
                    #expect(response.status == .seeOther)
                    #expect(response.headers[.location] == campaign)
                    return try #require(Self.cookie(response)).pair
                }
                try await client.execute(uri: link, method: .get) {
                    #expect($0.status == .unauthorized, "a link works once")
                    #expect($0.headers[.setCookie] == nil)
                }
                // This service runs no campaigns: the page is 404, but behind the session.
                try await client.execute(uri: campaign, method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .notFound)
                }
                try await client.execute(uri: "/", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .ok)
                }
                #expect(try await store.revokeAPIKey(id: key.id, now: 2))
                try await client.execute(uri: "/", method: .get, headers: [.cookie: session]) {
                    #expect($0.status == .seeOther, "the revoked key's session ended")
                }
                try await client.execute(uri: "/", method: .get, headers: [.authorization: "Bearer \(key.key)"]) {
                    #expect($0.status == .seeOther)
                }
            }
        }
    }

    @Test func withoutAConsoleItsPathsAreNotFound() async throws {
        try await self.withService(console: false) { app, _, key in
            try await app.test(.router) { client in
                for path in ["/", "/console/login", "/console/console.css"] {
                    try await client.execute(uri: path, method: .get, headers: [.authorization: "Bearer \(key.key)"]) {
                        #expect($0.status == .notFound, "\(path)")
                        #expect($0.headers[.contentType] == "application/problem+json")
                    }
                }
                try await client.execute(
                    uri: "/console/sessions",
                    method: .post,
                    headers: [.authorization: "Bearer \(key.key)"]
                ) {
                    #expect($0.status == .notFound)
                }
            }
        }
    }
}
