import APNSWire
import SalvoHTTP2
import SalvoRows
import SalvoSend
import SalvoService

/// The `send --journal` request of a campaign: its audience, its payload or template, its headers and rate over the
/// service's own gateway and credentials, its journal and result files in its folder. Built the same way from the
/// campaign's stored settings on every run, so that each run after the first resumes the journal (the journal
/// refuses a request whose settings changed).
public struct CampaignJob: Sendable {
    /// The service's HTTP/2 job: the client (gateway, credentials, trust, connections) and `onUncertain`.
    public var base: HTTP2JobConfiguration
    /// The topic of a campaign that names none (`serve --topic`).
    public var defaultTopic: String?
    public var folder: CampaignFolder
    /// The folder server-side audiences must be under (`serve --campaign-files`); nil: none are taken.
    public var allowedFiles: String?
    /// How large an uploaded audience may be, and the room the store's disk must keep (`CampaignUploadRoom`).
    public var uploadRoom = CampaignUploadRoom.standard
    /// The database whose queries may be audiences (`serve --campaign-postgres`); nil: none are taken.
    public var query: CampaignQuery?

    public init(
        base: HTTP2JobConfiguration,
        defaultTopic: String?,
        folder: CampaignFolder,
        allowedFiles: String?,
        query: CampaignQuery? = nil
    ) {
        self.base = base
        self.defaultTopic = defaultTopic
        self.folder = folder
        self.allowedFiles = allowedFiles
        self.query = query
    }

    /// The campaign's request. Blocks (a template file is read and hashed, a server-side path resolved): called on
    /// `BlockingWork`.
    ///
    /// - Parameters:
    ///   - journal: false for the check a new campaign gets before it is recorded (its input is opened and its first
    ///     rows read, nothing is written).
    ///   - group: of a local-time campaign, the group (by its instant) whose file is the input, with its journal and
    ///     result files in its folder (`LocalTimePlan`).
    /// - Throws: `ServiceProblem` naming the field at fault.
    public func request(
        id: String,
        settings: CampaignSettings,
        journal: Bool = true,
        group: Int64? = nil
    ) throws(ServiceProblem)
        -> SendRequest
    {
        let audience: String
        let outputs: String
        if let group {
            outputs = LocalTimePlan.groupFolder(self.folder, id, group)
            audience = outputs + "/audience.csv"
        } else {
            outputs = self.folder.folder(id)
            audience = try self.audience(id: id, settings: settings)
        }
        var templateFiles: PayloadTemplateFiles?
        if settings.template != nil {
            do throws(JobError) {
                templateFiles = try PayloadTemplateFiles.load(template: self.folder.template(id))
            } catch {
                throw ServiceProblem(.invalidCampaign, detail: error.message, field: "template")
            }
        }
        let payload: Payload
        do throws(PayloadError) {
            if let first = templateFiles?.templates.templates.first {
                payload = first.probe
            } else {
                payload = try Payload(jsonBytes: settings.payload ?? [])
            }
        } catch {
            throw ServiceProblem(.badRequest, detail: error.message, field: "payload")
        }
        var client = self.base.client
        client.rate = settings.rate
        var configuration = HTTP2JobConfiguration(
            client: client,
            headers: try settings.headers(defaultTopic: self.defaultTopic),
            payload: payload
        )
        configuration.retry = self.base.retry
        configuration.onUncertain = self.base.onUncertain
        // A query's snapshot is read under the name `send --from-postgres` gives it (its rejects' `file` column).
        let queried: Bool
        if case .postgres = settings.audience, group == nil { queried = true } else { queried = false }
        var request = SendRequest(
            files: [queried ? CampaignQuery.inputName : audience],
            input: TokenSource.Options(column: .name(settings.column)),
            interface: .http2(configuration),
            outputs: journal
                ? SendOutputs(
                    report: outputs + "/report.json",
                    rejects: outputs + "/rejects.csv",
                    unregistered: outputs + "/unregistered.csv",
                    unsettled: outputs + "/unsettled.csv"
                ) : SendOutputs(),
            journal: journal
                ? SendJournal(directory: outputs + "/journal", settings: self.settings(settings), waitSeconds: 30)
                : nil,
            payloads: templateFiles?.templates
        )
        if queried { request.inputSpools.read(CampaignQuery.inputName, from: audience) }
        request.payloadFiles = templateFiles?.files ?? []
        request.settings = self.settings(settings)
        return request
    }

    /// The campaign's audience file: its upload, the server-side file its settings name, resolved, or its query's
    /// snapshot (which `prepareAudience` takes).
    ///
    /// - Throws: `ServiceProblem` (422, `audience.file`) for a file that cannot be the audience.
    public func audience(id: String, settings: CampaignSettings) throws(ServiceProblem) -> String {
        switch settings.audience {
        case .upload:
            return self.folder.audience(id)
        case .postgres:
            return self.folder.query(id)
        case .file(let path):
            switch CampaignFolder.resolve(path, allowed: self.allowedFiles) {
            case .success(let resolved): return resolved
            case .failure(let error): throw ServiceProblem(.invalidCampaign, detail: error.reason, errors: [error])
            }
        }
    }

    /// Makes the audience file ready before a run reads it: a query's rows are copied, once, at the first run
    /// (`CampaignQuery.snapshot`); an upload or a server-side file is ready as it is.
    ///
    /// - Throws: `ServiceProblem` saying why the query's rows could not be copied (nothing is kept, nothing sent).
    public func prepareAudience(id: String, settings: CampaignSettings) async throws(ServiceProblem) {
        guard case .postgres(let text) = settings.audience else { return }
        guard let query else { throw Self.noDatabase }
        try await query.snapshot(query: text, column: settings.column, path: self.folder.query(id))
    }

    /// A campaign naming a query on a service with no database for campaigns.
    static let noDatabase = ServiceProblem(
        .invalidCampaign,
        detail: "this service takes no query as an audience (salvo serve --campaign-postgres URL)",
        field: "audience.postgres"
    )

    /// What changes what is sent and is not in the request's values as such, for the journal to compare between
    /// runs (as `send` gives its options).
    private func settings(_ settings: CampaignSettings) -> [String: String] {
        [
            "campaign": "service",
            "--template": settings.template ?? "",
            "--priority": settings.priority.map { String($0.rawValue) } ?? "",
            "--topic": settings.topic ?? self.defaultTopic ?? "",
            "--push-type": settings.pushType?.rawValue ?? "alert",
            "--collapse-id": settings.collapseID ?? "",
            "--expiry": settings.expiration.map { String($0) } ?? "",
            "--rate": settings.rate.map { String($0) } ?? "",
        ]
    }
}
