import SalvoHTTP2
import SalvoSend
import SalvoService

extension CampaignJob {
    /// The `send --journal` request of one partition of a fleet's campaign (`PartitionSpool`): the campaign's request
    /// on the partition's file, with its journal and result files in the partition's folder, paced at the claim's
    /// `share` of the campaign's rate (the journal's settings keep the campaign's rate, so that a partition claimed
    /// again with another share resumes its journal), asking `gate` before each row it writes.
    public func request(
        id: String,
        settings: CampaignSettings,
        partition part: Int,
        share: Int?,
        gate: (any HTTP2WriteGate)? = nil
    ) throws(ServiceProblem) -> SendRequest {
        var request = try self.request(id: id, settings: settings, journal: true)
        let folder = PartitionSpool.folder(self.folder, id, part)
        request.files = [folder + "/audience.csv"]
        request.outputs = SendOutputs(
            report: folder + "/report.json",
            rejects: folder + "/rejects.csv",
            unregistered: folder + "/unregistered.csv",
            unsettled: folder + "/unsettled.csv"
        )
        request.journal?.directory = folder + "/journal"
        if case .http2(var configuration) = request.interface {
            configuration.client.rate = share
            configuration.gate = gate
            request.interface = .http2(configuration)
        }
        return request
    }
}
