import APNSWire
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import SalvoData
import SalvoService
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoServer

/// The HTTP shell against its contract: every operation of the OpenAPI document is a route of the responder and
/// every route is in the document, and the answers the shell makes itself (401, 404, 405, 413, 415, problem details,
/// request ids) through Hummingbird without a socket.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct ServiceRoutesTests {
    static let documentPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("data/openapi/salvo-v1.json").path

    static func document() throws -> JSONValue {
        try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: Self.documentPath)))).value
    }

    @Test func theRoutesAreTheDocumentsOperations() throws {
        guard case .object(let paths)? = try Self.document()["paths"] else {
            Issue.record("the document has no paths")
            return
        }
        var documented: Set<String> = []
        for path in paths {
            guard case .object(let operations) = path.value else { continue }
            let methods = operations.map(\.key).filter {
                ["get", "put", "post", "delete", "patch", "head", "options"].contains($0)
            }
            // A template path's parameters stand for any segment.
            let segments = path.key.split(separator: "/").map { $0.hasPrefix("{") ? "x" : $0 }
            guard let route = ServiceResponder.methods(for: segments) else {
                Issue.record("\(path.key) is in the document but not a route")
                continue
            }
            #expect(route.route == path.key, "\(path.key) is routed as \(route.route)")
            #expect(
                Set(route.methods.map { $0.rawValue.lowercased() }) == Set(methods),
                "\(path.key): the document says \(methods), the route takes \(route.methods)"
            )
            documented.insert(path.key)
        }
        let routes: [[Substring]] =
            [
                ["healthz"], ["readyz"], ["metrics"], ["openapi.json"], ["v1", "notifications"],
                ["v1", "notifications", "x"], ["v1", "webhooks"],
                ["v1", "batches", "x"], ["v1", "templates", "x"], ["v1", "campaigns"], ["v1", "campaigns", "x"],
            ]
            + ["pause", "resume", "cancel", "report", "rejects", "unsettled"].map {
                ["v1", "campaigns", "x", Substring($0)]
            }
        for route in routes {
            let name = try #require(ServiceResponder.methods(for: route)).route
            #expect(documented.contains(name), "\(name) is a route the document does not have")
        }
    }

    @Test func theShellsOwnAnswersAreProblemDetails() async throws {
        let setup = try await ServiceSimulator.start()
        let store = try await SQLiteNotificationStore.open(directory: try scratchFolder("routes"))
        let service = try await NotificationService.start(configuration: setup.configuration, store: store)
        let (key, record) = APIKeys.make(name: "tests", now: 1)
        try await store.addAPIKey(record)
        let responder = ServiceResponder(
            service: service,
            document: Array(try Data(contentsOf: URL(fileURLWithPath: Self.documentPath))),
            metricsText: { "# metrics\n" },
            logger: Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let app = Application(responder: responder)
        let bearer: HTTPFields = [.authorization: "Bearer \(key)", .contentType: "application/json"]
        try await app.test(.router) { client in
            try await client.execute(uri: "/v1/notifications", method: .post, body: ByteBuffer(string: "{}")) {
                #expect($0.status == .unauthorized)
                #expect($0.headers[.wwwAuthenticate] == "Bearer")
                #expect($0.headers[.contentType] == "application/problem+json")
                #expect($0.headers[HTTPField.Name("X-Request-Id")!] != nil)
            }
            try await client.execute(uri: "/v1/notifications", method: .get, headers: bearer) {
                #expect($0.status == .methodNotAllowed)
                #expect($0.headers[.allow] == "POST")
            }
            try await client.execute(uri: "/nowhere", method: .get, headers: [HTTPField.Name("X-Request-Id")!: "r-1"]) {
                #expect($0.status == .notFound)
                #expect($0.headers[HTTPField.Name("X-Request-Id")!] == "r-1")
            }
            var text = bearer
            text[.contentType] = "text/plain"
            try await client.execute(
                uri: "/v1/notifications",
                method: .post,
                headers: text,
                body: ByteBuffer(string: "{}")
            ) {
                #expect($0.status == .unsupportedMediaType)
            }
            let large = ByteBuffer(repeating: UInt8(ascii: " "), count: ServiceResponder.maximumBodyBytes + 1)
            try await client.execute(uri: "/v1/notifications", method: .post, headers: bearer, body: large) {
                #expect($0.status == .contentTooLarge)
            }
            try await client.execute(uri: "/v1/notifications/not-a-uuid", method: .get, headers: bearer) {
                #expect($0.status == .badRequest)
            }
            try await client.execute(
                uri: "/v1/notifications/\(UUID().uuidString)?wait=31",
                method: .get,
                headers: bearer
            ) {
                #expect($0.status == .badRequest)
            }
            let body = #"{"notifications":[{"token":"\#(notification(1).token.hexString)","payload":{"aps":{}}}]}"#
            let id = try await client.execute(
                uri: "/v1/notifications",
                method: .post,
                headers: bearer,
                body: ByteBuffer(string: body)
            ) { response -> String in
                #expect(response.status == .accepted)
                let value = try JSONValue.parse(Array(response.body.readableBytesView)).value
                guard
                    case .string(let id)? = value["notifications"].flatMap({ list -> JSONValue? in
                        if case .array(let items) = list { items.first?["id"] } else { nil }
                    })
                else { return "" }
                return id
            }
            try await client.execute(uri: "/v1/notifications/\(id)?wait=10", method: .get, headers: bearer) {
                #expect($0.status == .ok)
                let value = try JSONValue.parse(Array($0.body.readableBytesView)).value
                #expect(value["state"] == .string("delivered"))
                #expect(value["final"] == .bool(true))
            }
            try await client.execute(uri: "/openapi.json", method: .get) {
                #expect($0.status == .ok)
                let value = try JSONValue.parse(Array($0.body.readableBytesView)).value
                #expect(value["openapi"] == .string("3.1.0"))
            }
        }
        await service.shutdown()
        try await setup.simulator.shutdown()
    }
}
