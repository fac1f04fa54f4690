import APNSWire
import Hummingbird
import NIOCore
import SalvoCampaigns
import SalvoRows
import SalvoService

/// `/v1/campaigns`: the HTTP side of `CampaignRunner`. An uploaded audience is streamed to a file as it arrives
/// (never held whole), its settings read first from the `Salvo-Campaign` header so that a bad one is refused before
/// the body is read.
extension ServiceResponder {
    func campaign(
        _ route: String,
        path: [Substring],
        request: Request,
        context: Context,
        keyID: String
    ) async -> Response {
        guard let campaigns = self.campaigns else {
            return Self.problem(ServiceProblem(.unavailable, detail: "this service runs no campaigns"))
        }
        if route == "/v1/campaigns" {
            if request.method == .post {
                return await self.createCampaign(campaigns, request: request, context: context, keyID: keyID)
            }
            let list = await campaigns.list()
            let now = self.service.configuration.now()
            return Self.json(
                200,
                .object([JSONMember("campaigns", .array(list.map { CampaignJSON.campaign($0, now: now) }))])
            )
        }
        let id = path[2].lowercased()
        guard APNSRequestHeaders.isCanonicalUUID(id) else {
            return Self.problem(
                ServiceProblem(.badRequest, detail: "a campaign id is a UUID, not \(path[2])", field: "id")
            )
        }
        let result: Result<CampaignStatus, ServiceProblem>
        switch path.count == 4 ? path[3] : "" {
        case "":
            guard let status = await campaigns.status(id) else {
                return Self.problem(ServiceProblem(.notFound, detail: "no campaign \(id)"))
            }
            result = .success(status)
        case "pause": result = await campaigns.apply(.pause, to: id)
        case "resume": result = await campaigns.apply(.resume, to: id)
        case "cancel": result = await campaigns.apply(.cancel, to: id)
        case "report": return Self.file(await campaigns.file(.report, of: id), type: "application/json")
        case "rejects": return Self.file(await campaigns.file(.rejects, of: id), type: "text/csv")
        case "fallback": return Self.file(await campaigns.file(.fallback, of: id), type: "text/csv")
        default: return Self.file(await campaigns.file(.unsettled, of: id), type: "text/csv")
        }
        switch result {
        case .success(let status):
            return Self.json(200, CampaignJSON.campaign(status, now: self.service.configuration.now()))
        case .failure(let problem):
            return Self.problem(problem)
        }
    }

    private func createCampaign(
        _ campaigns: CampaignRunner,
        request: Request,
        context: Context,
        keyID: String
    ) async -> Response {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let media = type.split(separator: ";").first.map { $0.filter { $0 != " " && $0 != "\t" } } ?? ""
        let result: Result<CampaignStatus, ServiceProblem>
        switch media {
        case "application/json":
            let body: [UInt8]
            switch await Self.body(request, context: context) {
            case .success(let bytes): body = bytes
            case .failure(let problem): return Self.problem(problem)
            }
            do throws(ServiceProblem) {
                let settings = try CampaignSettings.read(body, upload: false)
                result = await campaigns.create(settings: settings, upload: nil, keyID: keyID)
            } catch {
                return Self.problem(error)
            }
        case "text/csv":
            // The header that carries an upload's settings: the JSON object a JSON request would send, without `audience`.
            guard let header = request.headers[.init("Salvo-Campaign")!] else {
                return Self.problem(
                    ServiceProblem(
                        .badRequest,
                        detail: "an uploaded audience needs its campaign's settings in the Salvo-Campaign header",
                        field: "Salvo-Campaign"
                    )
                )
            }
            let settings: CampaignSettings
            do throws(ServiceProblem) {
                settings = try CampaignSettings.read(
                    Array(header.utf8),
                    upload: true,
                    source: "the Salvo-Campaign header"
                )
            } catch {
                return Self.problem(error)
            }
            let upload: CampaignUpload
            switch await self.receive(request, into: campaigns) {
            case .success(let received): upload = received
            case .failure(let problem): return Self.problem(problem)
            }
            result = await campaigns.create(settings: settings, upload: upload, keyID: keyID)
        default:
            return Self.problem(
                ServiceProblem(
                    .unsupportedMediaType,
                    detail: "a campaign is application/json (a server-side audience), or text/csv (the audience, with "
                        + "the settings in the Salvo-Campaign header), not \(type.isEmpty ? "unnamed" : type)"
                )
            )
        }
        switch result {
        case .success(let status):
            var response = Self.json(201, CampaignJSON.campaign(status, now: self.service.configuration.now()))
            response.headers[.location] = "/v1/campaigns/\(status.record.id)"
            return response
        case .failure(let problem):
            return Self.problem(problem)
        }
    }

    /// The body, written to a file as it arrives: whole (as long as its `Content-Length` says, when it says) and
    /// synced, or removed and refused.
    private func receive(
        _ request: Request,
        into campaigns: CampaignRunner
    ) async -> Result<
        CampaignUpload, ServiceProblem
    > {
        let expected = request.headers[.contentLength].flatMap { Int($0) }
        let room = campaigns.uploadRoom
        if let expected, let refusal = room.check(declared: expected, free: await campaigns.freeBytes()) {
            return .failure(CampaignUploadRoom.problem(refusal))
        }
        let upload: CampaignUpload
        do {
            upload = try await campaigns.beginUpload()
        } catch {
            return .failure(
                ServiceProblem(.unavailable, detail: "the store cannot write: \(error.message)", retryAfter: 5)
            )
        }
        var received = 0
        var pending: [UInt8] = []
        do {
            for try await buffer in request.body {
                received += buffer.readableBytes
                pending += buffer.readableBytesView
                if received > room.limit {
                    await upload.discard()
                    return .failure(CampaignUploadRoom.problem(.overLimit(bytes: received, limit: room.limit)))
                }
                if pending.count >= 1 << 20 {
                    try await upload.write(pending)
                    pending.removeAll(keepingCapacity: true)
                    // The room left, once a MiB: the upload is refused while the disk still has its reserve.
                    if let refusal = room.check(received: received, free: await campaigns.freeBytes()) {
                        await upload.discard()
                        return .failure(CampaignUploadRoom.problem(refusal))
                    }
                }
            }
            if !pending.isEmpty { try await upload.write(pending) }
            if let refusal = room.check(received: received, free: await campaigns.freeBytes()) {
                await upload.discard()
                return .failure(CampaignUploadRoom.problem(refusal))
            }
        } catch let failure as StoreFailure {
            await upload.discard()
            return .failure(
                ServiceProblem(.unavailable, detail: "the store cannot write: \(failure.message)", retryAfter: 5)
            )
        } catch {
            await upload.discard()
            return .failure(
                ServiceProblem(
                    .badRequest,
                    detail: "the upload stopped after \(received) bytes: nothing was kept",
                    field: "audience"
                )
            )
        }
        if let expected, expected != received {
            await upload.discard()
            return .failure(
                ServiceProblem(
                    .badRequest,
                    detail: "the upload ended after \(received) of its \(expected) bytes: nothing was kept",
                    field: "audience"
                )
            )
        }
        do {
            try await upload.finish()
        } catch {
            await upload.discard()
            return .failure(
                ServiceProblem(.unavailable, detail: "the store cannot write: \(error.message)", retryAfter: 5)
            )
        }
        return .success(upload)
    }

    private static func file(_ result: Result<[UInt8], ServiceProblem>, type: String) -> Response {
        switch result {
        case .success(let bytes):
            var response = Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
            response.headers[.contentType] = type
            return response
        case .failure(let problem):
            return Self.problem(problem)
        }
    }
}

/// A campaign as the API's JSON (the `Campaign` schema of the OpenAPI document).
enum CampaignJSON {
    static func campaign(_ status: CampaignStatus, now: Int64) -> JSONValue {
        let record = status.record
        var members: [JSONMember] = [
            JSONMember("id", .string(record.id)),
            JSONMember("state", .string(status.state.rawValue)),
        ]
        if let name = status.settings.name { members.append(JSONMember("name", .string(name))) }
        members += [
            JSONMember("created_at", .string(ServiceJSON.time(record.createdAt))),
            JSONMember("created_by", .string(record.createdBy)),
            JSONMember("send_at", .string(ServiceJSON.time(record.sendAt))),
        ]
        if status.startedNow { members.append(JSONMember("started_now", .bool(true))) }
        if let started = record.startedAt {
            members.append(JSONMember("started_at", .string(ServiceJSON.time(started))))
        }
        if let ended = record.endedAt { members.append(JSONMember("ended_at", .string(ServiceJSON.time(ended)))) }
        if let message = record.message { members.append(JSONMember("message", .string(message))) }
        if let rate = status.settings.rate { members.append(JSONMember("rate_limit", .int(rate))) }
        if let rate = status.rate { members.append(JSONMember("rate", .number(String(Int(rate.rounded()))))) }
        if let end = status.estimatedEnd(now: now) {
            members.append(JSONMember("estimated_end", .string(ServiceJSON.time(end))))
        }
        let counts = status.counts
        members.append(
            JSONMember(
                "counts",
                .object([
                    JSONMember("input_rows", .int(counts.inputRows)),
                    JSONMember("invalid_input", .int(counts.invalidInput)),
                    JSONMember("valid_rows", .int(counts.validRows)),
                    JSONMember("delivered", .int(counts.delivered)),
                    JSONMember("confirmed", .int(counts.confirmed)),
                    JSONMember("presumed", .int(counts.presumed)),
                    JSONMember("rejected", .int(counts.rejectedTotal)),
                    JSONMember(
                        "rejected_by_reason",
                        .object(counts.rejected.sorted { $0.key < $1.key }.map { JSONMember($0.key, .int($0.value)) })
                    ),
                    JSONMember("expired", .int(counts.expired)),
                    JSONMember("uncertain", .int(counts.uncertain)),
                    JSONMember("not_sent", .int(counts.notSent)),
                    JSONMember("suppressed", .int(counts.suppressed)),
                ])
            )
        )
        if let time = status.settings.deliverAtLocal {
            var local: [JSONMember] = [
                JSONMember("deliver_at_local", .string(time.description)),
                JSONMember("zone_column", .string(status.settings.zoneColumn)),
                JSONMember("local_fallback", .string(status.settings.localFallback.description)),
            ]
            if let groups = status.local {
                let waiting = groups.waiting
                local += [
                    JSONMember("groups", .int(groups.plan.groups.count)),
                    JSONMember("groups_sent", .int(groups.sent.count)),
                    JSONMember("rows_waiting", .int(waiting.rows)),
                    JSONMember("fallback_rows", .int(groups.plan.fallbackRows)),
                    JSONMember("skipped_rows", .int(groups.plan.skippedRows)),
                ]
                if let next = waiting.next {
                    local.append(JSONMember("next_group_at", .string(ServiceJSON.time(next))))
                }
            }
            members.append(JSONMember("local_time", .object(local)))
        }
        if let settings = try? JSONValue.parse(status.settings.json).value {
            members.append(JSONMember("settings", settings))
        }
        return .object(members)
    }
}
