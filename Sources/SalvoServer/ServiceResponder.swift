import APNSWire
import CoreMetrics
import Hummingbird
import HummingbirdAuth
import Logging
import NIOCore
import SalvoCampaigns
import SalvoService
import SalvoWebhooks

/// The HTTP API of `salvo serve`: each operation of the OpenAPI document (`data/openapi/salvo-v1.json`) mapped to
/// the service, bearer API keys on `/v1`, RFC 9457 problem details for every refusal, a request id on every answer.
///
/// One responder with its own dispatch rather than Hummingbird's router: the document's answers for an unknown
/// path (404) and a known path with another method (405 with `Allow`) are problem details too, and the few routes
/// are checked against the document by a test (`ServiceRoutesTests`).
public struct ServiceResponder: HTTPResponder {
    public typealias Context = BasicRequestContext

    let service: NotificationService
    /// The campaigns (`/v1/campaigns`); nil: the service runs none, and those operations answer 503.
    let campaigns: CampaignRunner?
    /// The webhooks (`GET /v1/webhooks`); nil: the service has none, and the list is empty.
    let webhooks: WebhookDispatcher?
    /// The console (`/`, `/console/…`); nil: those paths answer 404 (`--no-console`).
    let console: Console?
    let document: [UInt8]
    let metricsText: @Sendable () async -> String
    let logger: Logger

    /// The largest body a request may have.
    public static let maximumBodyBytes = 4 << 20

    public init(
        service: NotificationService,
        campaigns: CampaignRunner? = nil,
        webhooks: WebhookDispatcher? = nil,
        console: Console? = nil,
        document: [UInt8],
        metricsText: @escaping @Sendable () async -> String,
        logger: Logger
    ) {
        self.service = service
        self.campaigns = campaigns
        self.webhooks = webhooks
        self.console = console
        self.document = document
        self.metricsText = metricsText
        self.logger = logger
    }

    /// The paths the API answers, with their methods (what a 405 lists in `Allow`).
    static func methods(for path: [Substring]) -> (route: String, methods: [HTTPRequest.Method])? {
        switch path.count {
        case 1 where ["healthz", "readyz", "metrics", "openapi.json"].contains(path[0]):
            return ("/" + path[0], [.get])
        case 2 where path == ["v1", "notifications"]: return ("/v1/notifications", [.post])
        case 2 where path == ["v1", "webhooks"]: return ("/v1/webhooks", [.get])
        case 3 where path[0] == "v1" && path[1] == "notifications": return ("/v1/notifications/{id}", [.get])
        case 3 where path[0] == "v1" && path[1] == "batches": return ("/v1/batches/{batch}", [.get])
        case 3 where path[0] == "v1" && path[1] == "templates": return ("/v1/templates/{name}", [.get, .put, .delete])
        case 2 where path == ["v1", "campaigns"]: return ("/v1/campaigns", [.get, .post])
        case 3 where path[0] == "v1" && path[1] == "campaigns": return ("/v1/campaigns/{id}", [.get])
        case 4 where path[0] == "v1" && path[1] == "campaigns" && ["pause", "resume", "cancel"].contains(path[3]):
            return ("/v1/campaigns/{id}/" + path[3], [.post])
        case 4
        where path[0] == "v1" && path[1] == "campaigns"
            && ["report", "rejects", "unsettled", "fallback"].contains(path[3]):
            return ("/v1/campaigns/{id}/" + path[3], [.get])
        default: return nil
        }
    }

    public func respond(to request: Request, context: Context) async throws -> Response {
        let start = ContinuousClock.now
        let requestID = Self.requestID(request.headers[.init("X-Request-Id")!])
        let path = request.uri.path.split(separator: "/", omittingEmptySubsequences: true)
        var response: Response
        let route: String
        if let console = self.console, Self.isConsolePath(path) {
            route = "console"
            response = await self.console(console, path: path, request: request, context: context)
        } else if let (name, methods) = Self.methods(for: path) {
            route = name
            if methods.contains(request.method) {
                response = await self.route(name, path: path, request: request, context: context, requestID: requestID)
            } else {
                response = Self.problem(
                    ServiceProblem(
                        .methodNotAllowed,
                        detail: "\(name) takes \(methods.map(\.rawValue).joined(separator: ", "))"
                    )
                )
                response.headers[.allow] = methods.map(\.rawValue).joined(separator: ", ")
            }
        } else {
            route = "unknown"
            response = Self.problem(ServiceProblem(.notFound, detail: "no such path: \(request.uri.path)"))
        }
        response.headers[.init("X-Request-Id")!] = requestID
        let elapsed = ContinuousClock.now - start
        Timer(
            label: "salvo_service_request_seconds",
            dimensions: [("route", route), ("status", String(response.status.code))],
            preferredDisplayUnit: .seconds
        ).recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        if response.status.code >= 500 || route.hasPrefix("/v1") {
            self.logger.info(
                "request",
                metadata: [
                    "request_id": "\(requestID)", "method": "\(request.method.rawValue)", "route": "\(route)",
                    "status": "\(response.status.code)",
                ]
            )
        }
        return response
    }

    private func route(
        _ route: String,
        path: [Substring],
        request: Request,
        context: Context,
        requestID: String
    ) async -> Response {
        switch route {
        case "/healthz":
            return Self.json(200, .object([JSONMember("status", .string("ok"))]))
        case "/readyz":
            let readiness = await self.service.readiness()
            return Self.json(
                readiness.isReady ? 200 : 503,
                .object([
                    JSONMember("ready", .bool(readiness.isReady)),
                    JSONMember(
                        "checks",
                        .object([
                            JSONMember("store", .string(readiness.store ?? "ok")),
                            JSONMember("credentials", .string(readiness.sender ?? "ok")),
                            JSONMember("gateway", .string(readiness.sender ?? "ok")),
                        ])
                    ),
                ])
            )
        case "/metrics":
            var response = Response(
                status: .ok,
                body: ResponseBody(byteBuffer: ByteBuffer(string: await self.metricsText()))
            )
            response.headers[.contentType] = "text/plain; version=0.0.4"
            return response
        case "/openapi.json":
            var response = Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: self.document)))
            response.headers[.contentType] = "application/json"
            return response
        default:
            break
        }
        // Every /v1 operation needs an API key.
        guard let bearer = request.headers.bearer?.token, let keyID = await self.service.keyID(bearer: bearer) else {
            var response = Self.problem(
                ServiceProblem(
                    .unauthorized,
                    detail: request.headers[.authorization] == nil
                        ? "an Authorization: Bearer <API key> header is needed"
                        : "the API key is not known, or was revoked"
                )
            )
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        // Shutting down: the rows in flight settle, nothing new is taken, and no wait is held.
        if self.service.isStopping {
            return Self.problem(ServiceProblem(.unavailable, detail: "the service is shutting down", retryAfter: 5))
        }
        switch (route, request.method) {
        case ("/v1/notifications", _):
            return await self.post(request: request, context: context, keyID: keyID)
        case ("/v1/notifications/{id}", _):
            return await self.notification(String(path[2]), request: request)
        case ("/v1/batches/{batch}", _):
            return await self.batch(String(path[2]), request: request)
        case ("/v1/templates/{name}", .put):
            return await self.putTemplate(String(path[2]), request: request, context: context)
        case ("/v1/templates/{name}", .delete):
            return await self.deleteTemplate(String(path[2]))
        case ("/v1/webhooks", _):
            return await self.webhookList()
        case _ where route.hasPrefix("/v1/campaigns"):
            return await self.campaign(route, path: path, request: request, context: context, keyID: keyID)
        default:
            return self.getTemplate(String(path[2]))
        }
    }

    // MARK: Operations

    private func post(request: Request, context: Context, keyID: String) async -> Response {
        let body: [UInt8]
        switch await Self.body(request, context: context) {
        case .success(let bytes): body = bytes
        case .failure(let problem): return Self.problem(problem)
        }
        let key = request.headers[.init("Idempotency-Key")!]
        let answer = await self.service.submit(keyID: keyID, idempotencyKey: key, body: body)
        var response = Response(
            status: .init(code: answer.status),
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body))
        )
        response.headers[.contentType] = answer.isProblem ? "application/problem+json" : "application/json"
        if answer.replayed { response.headers[.init("Idempotent-Replayed")!] = "true" }
        if let retryAfter = answer.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    private func notification(_ id: String, request: Request) async -> Response {
        guard APNSRequestHeaders.isCanonicalUUID(id.lowercased()) else {
            return Self.problem(
                ServiceProblem(.badRequest, detail: "a notification id is a UUID, not \(id)", field: "id")
            )
        }
        let wait: Double
        switch self.wait(request) {
        case .success(let seconds): wait = seconds
        case .failure(let problem): return Self.problem(problem)
        }
        switch await self.service.notification(id: id, wait: wait) {
        case .success(let record): return Self.json(200, ServiceJSON.record(record))
        case .failure(let problem): return Self.problem(problem)
        }
    }

    private func batch(_ id: String, request: Request) async -> Response {
        guard APNSRequestHeaders.isCanonicalUUID(id.lowercased()) else {
            return Self.problem(ServiceProblem(.badRequest, detail: "a batch id is a UUID, not \(id)", field: "batch"))
        }
        let wait: Double
        switch self.wait(request) {
        case .success(let seconds): wait = seconds
        case .failure(let problem): return Self.problem(problem)
        }
        switch await self.service.batch(id: id, wait: wait) {
        case .success(let records): return Self.json(200, ServiceJSON.batch(id.lowercased(), records))
        case .failure(let problem): return Self.problem(problem)
        }
    }

    private func putTemplate(_ name: String, request: Request, context: Context) async -> Response {
        let body: [UInt8]
        switch await Self.body(request, context: context) {
        case .success(let bytes): body = bytes
        case .failure(let problem): return Self.problem(problem)
        }
        switch await self.service.putTemplate(name: name, body: body) {
        case .success(let template): return Self.json(200, ServiceJSON.template(template, withText: false))
        case .failure(let problem): return Self.problem(problem)
        }
    }

    private func getTemplate(_ name: String) -> Response {
        guard let template = self.service.template(name: name) else {
            return Self.problem(ServiceProblem(.notFound, detail: "no template named \(name)"))
        }
        return Self.json(200, ServiceJSON.template(template, withText: true))
    }

    private func deleteTemplate(_ name: String) async -> Response {
        switch await self.service.deleteTemplate(name: name) {
        case .success(true): return Response(status: .noContent)
        case .success(false): return Self.problem(ServiceProblem(.notFound, detail: "no template named \(name)"))
        case .failure(let problem): return Self.problem(problem)
        }
    }

    /// `GET /v1/webhooks`: each webhook's events by state (pending, delivered, dead) and its failures.
    private func webhookList() async -> Response {
        guard let webhooks = self.webhooks else {
            return Self.json(200, .object([JSONMember("webhooks", .array([]))]))
        }
        do {
            let list = try await webhooks.status()
            return Self.json(200, .object([JSONMember("webhooks", .array(list.map(ServiceJSON.webhook)))]))
        } catch {
            return Self.problem(ServiceProblem(.unavailable, detail: "the store cannot read: \(error.message)"))
        }
    }

    // MARK: Pieces

    /// `?wait=SECONDS`: 0 when absent; a number from 0 to the service's maximum.
    private func wait(_ request: Request) -> Result<Double, ServiceProblem> {
        guard let text = request.uri.queryParameters["wait"] else { return .success(0) }
        let maximum = self.service.configuration.maximumWaitSeconds
        guard let seconds = Double(String(text)), seconds.isFinite, seconds >= 0, seconds <= maximum else {
            return .failure(
                ServiceProblem(
                    .badRequest,
                    detail: "wait is a number of seconds from 0 to \(Int(maximum)), not \(text)",
                    field: "wait"
                )
            )
        }
        return .success(seconds)
    }

    /// A JSON body of at most `maximumBodyBytes`.
    static func body(_ request: Request, context: Context) async -> Result<[UInt8], ServiceProblem> {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let media = type.split(separator: ";").first.map { $0.filter { $0 != " " && $0 != "\t" } } ?? ""
        guard media == "application/json" else {
            return .failure(
                ServiceProblem(
                    .unsupportedMediaType,
                    detail: "the body must be application/json, not \(type.isEmpty ? "unnamed" : type)"
                )
            )
        }
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > Self.maximumBodyBytes {
            return .failure(Self.tooLarge)
        }
        var request = request
        do {
            let buffer = try await request.collectBody(upTo: Self.maximumBodyBytes)
            return .success(Array(buffer.readableBytesView))
        } catch {
            return .failure(Self.tooLarge)
        }
    }

    private static let tooLarge = ServiceProblem(
        .payloadTooLarge,
        detail: "a request body is at most \(maximumBodyBytes) bytes"
    )

    static func json(_ status: Int, _ value: JSONValue) -> Response {
        var response = Response(
            status: .init(code: status),
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.compactBytes))
        )
        response.headers[.contentType] = "application/json"
        return response
    }

    static func problem(_ problem: ServiceProblem) -> Response {
        var response = Response(
            status: .init(code: problem.status),
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: problem.json))
        )
        response.headers[.contentType] = "application/problem+json"
        if let retryAfter = problem.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// The caller's request id when it is 1 to 128 visible ASCII characters; else a new one.
    static func requestID(_ given: String?) -> String {
        if let given, (1...128).contains(given.utf8.count), given.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) {
            return given
        }
        var generator = SystemRandomNumberGenerator()
        return String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)
    }
}
