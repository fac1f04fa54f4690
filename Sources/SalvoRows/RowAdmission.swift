import APNSWire

/// The rules that decide whether a row read in order goes out, written once for the two ways of reading: the
/// partition (another partition's rows are counted, not refused), the payload's rendering, with `dedupe` "duplicate
/// of the token on line N", and the suppression list (Apple's rule, with the row's registration time). `validate()`
/// applies them to the whole input first; `take` (an opened source, `PrefixReplay`) to each row as it is taken.
///
/// A value held by its `TokenSource` (its fields are the source's): what the rules find goes into the `Summary`
/// and the set of tokens seen that the caller passes. Its functions are inlined into `take`'s per-row loop
/// (`takeRows`), where a call per row, or a copy of a field (a retain and a release), would cost every row.
struct RowAdmission {
    /// What the rules make of a token row.
    enum Verdict: Equatable {
        /// It goes out (and counts as valid).
        case admitted
        /// Its token is another partition's: counted in `otherPartitions`, never looked at again.
        case otherPartition
        /// Refused (its payload, a duplicate, an unreadable registration time) or suppressed: its line is set aside.
        case setAside
    }

    /// The source's files, to name them in refusals.
    let files: [String]
    /// Only the rows of this partition go out (nil: every row).
    let partition: Partition?
    /// A token's second row is refused as a duplicate of its first.
    let dedupe: Bool
    let suppression: SuppressionList?
    let payloads: RowPayloads?

    /// Whether `token`'s row is this partition's.
    @inline(__always)
    func owns(_ token: DeviceToken) -> Bool {
        self.partition?.contains(token) ?? true
    }

    /// A row that holds no token (`RowReader.lastReject`): refused, or counted as another partition's when this
    /// one does not own bad rows (partition 0 does).
    @inline(__always)
    func refuse(_ reject: InputReject, summary: inout TokenSource.Summary) {
        if self.partition?.ownsBadRows == false {
            summary.otherPartitions += 1
        } else {
            summary.rejects.append(reject)
        }
    }

    /// The rules for a token row, in order: partition, payload (rendered into `fields`, its size measured; a row
    /// refused later leaves it to be overwritten by the next), duplicate (`seen`: each token's first row, its file
    /// index in the high 16 bits and its line), suppression. An admitted row is counted in `validRows`.
    ///
    /// - Parameter payloadColumns: the payload's columns in the row's file (`payloads`' templates).
    @inline(__always)
    func admit(
        _ row: TokenRow,
        reader: RowReader,
        fileIndex: Int,
        payloadColumns: [Int],
        seen: inout [DeviceToken: Int],
        summary: inout TokenSource.Summary,
        fields: inout RowFields
    ) -> Verdict {
        if let partition = self.partition, !partition.contains(row.token) {
            summary.otherPartitions += 1
            return .otherPartition
        }
        if let payloads = self.payloads {
            switch reader.renderPayload(columns: payloadColumns, payloads: payloads, into: &fields) {
            case .success(let result):
                summary.largestPayload = max(summary.largestPayload, result.count)
            case .failure(let error):
                // The file's name is looked up only for a row refused: a `String` held per row is a retain and a
                // release.
                summary.rejects.append(
                    InputReject(
                        file: self.files[fileIndex],
                        line: row.line,
                        value: row.token.hexString,
                        reason: error.message
                    )
                )
                return .setAside
            }
        }
        if self.dedupe {
            if let first = seen[row.token] {
                summary.rejects.append(self.duplicate(row, in: fileIndex, of: first))
                return .setAside
            }
            seen[row.token] = fileIndex << 48 | row.line
        }
        if let suppression = self.suppression, suppression.entries[row.token] != nil {
            // Only a listed token's registration time matters, so only those are read.
            switch reader.registrationTime(line: row.line) {
            case .unreadable(let reject):
                self.refuse(reject, summary: &summary)
                return .setAside
            case .known(let registeredAt):
                if suppression.suppresses(row.token, registeredAt: registeredAt) != nil {
                    summary.suppressed += 1
                    return .setAside
                }
                summary.reregistered += 1
            }
        }
        summary.validRows += 1
        return .admitted
    }

    /// The refusal of a token's second row: "duplicate of the token on line N", and the first row's file when the
    /// input has more than one.
    func duplicate(_ row: TokenRow, in fileIndex: Int, of first: Int) -> InputReject {
        let of = self.files.count > 1 ? " of \(self.files[first >> 48])" : ""
        return InputReject(
            file: self.files[fileIndex],
            line: row.line,
            value: row.token.hexString,
            reason: "duplicate of the token on line \(first & (1 << 48 - 1))\(of)"
        )
    }
}
