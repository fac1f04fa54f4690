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

    public init(base: HTTP2JobConfiguration, defaultTopic: String?, folder: CampaignFolder, allowedFiles: String?) {
        self.base = base
        self.defaultTopic = defaultTopic
        self.folder = folder
        self.allowedFiles = allowedFiles
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
        var request = SendRequest(
            files: [audience],
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
        request.payloadFiles = templateFiles?.files ?? []
        request.settings = self.settings(settings)
        return request
    }

    /// The campaign's audience file: its upload, or the server-side file its settings name, resolved.
    ///
    /// - Throws: `ServiceProblem` (422, `audience.file`) for a file that cannot be the audience.
    public func audience(id: String, settings: CampaignSettings) throws(ServiceProblem) -> String {
        switch settings.audience {
        case .upload:
            return self.folder.audience(id)
        case .file(let path):
            switch CampaignFolder.resolve(path, allowed: self.allowedFiles) {
            case .success(let resolved): return resolved
            case .failure(let error): throw ServiceProblem(.invalidCampaign, detail: error.reason, errors: [error])
            }
        }
    }

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
