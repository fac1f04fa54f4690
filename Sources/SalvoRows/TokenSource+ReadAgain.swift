import APNSWire
import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

extension TokenSource {
    /// Reads the token of a row again, from its file (for rows journaled without their tokens).
    ///
    /// Only rows that validation accepted are ever read again, so a failure here means the file changed
    /// during the job.
    ///
    /// - Precondition: `validate()` has returned.
    public func token(at reference: RowReference) throws(InputError) -> DeviceToken {
        let (column, descriptor) = self.state.withLockedValue {
            ($0.columns[reference.file], $0.descriptors[reference.file])
        }
        let path = self.files[reference.file]
        var size = 512
        while true {
            var bytes = [UInt8](repeating: 0, count: size)
            let count = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress, size, off_t(reference.offset))
            }
            guard count > 0 else { break }
            let token: DeviceToken?? = bytes.withUnsafeBufferPointer { all in
                let piece = UnsafeBufferPointer(rebasing: all[0..<count])
                guard let fields = CSVReader.fields(ofRecordIn: piece, complete: count < size) else { return nil }
                guard column < fields.count else { return .some(nil) }
                let field = fields[column]
                var text = Array(piece[field.start..<field.end])
                if field.hasEscapedQuotes { text.removeAll { $0 == UInt8(ascii: "\"") } }
                return .some(text.withUnsafeBytes { try? self.options.encoding.token($0) })
            }
            switch token {
            case .some(.some(let token)): return token
            case .some(.none): break
            case .none:
                size *= 4
                if size <= 1 << 20 { continue }
            }
            break
        }
        throw InputError(
            file: path,
            line: nil,
            message: "the file changed during the job (no token at byte \(reference.offset))"
        )
    }
}

extension TokenSource {
    /// Reads a row's payload fields again from its file (a row sent again after its chunk's fields were replaced),
    /// into `fields` (refilled with that one row, rendered).
    ///
    /// - Precondition: `validate()` has returned, and the source has `payloads`.
    public func fields(at reference: RowReference, into fields: inout RowFields) throws(InputError) {
        let payloads = self.payloads!
        let (columns, descriptor) = self.state.withLockedValue {
            ($0.payloadColumns[reference.file], $0.descriptors[reference.file])
        }
        fields.removeAll(columnCount: payloads.templates.columns.count)
        fields.stampSendTime()
        var size = 4096
        while size <= 1 << 20 {
            var bytes = [UInt8](repeating: 0, count: size)
            let count = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress, size, off_t(reference.offset))
            }
            guard count > 0 else { break }
            let found: [CSVReader.Field]? = bytes.withUnsafeBufferPointer { all in
                CSVReader.fields(ofRecordIn: UnsafeBufferPointer(rebasing: all[0..<count]), complete: count < size)
            }
            guard let found else {
                size *= 4
                continue
            }
            let rendered = bytes.withUnsafeBufferPointer { all in
                fields.render(payloads) { _ in
                    nil
                } copy: { column, scratch in
                    guard columns[column] >= 0 && columns[column] < found.count else { return false }
                    CSVReader.append(found[columns[column]], of: all.baseAddress!, to: &scratch)
                    return true
                }
            }
            if case .success = rendered {
                fields.keep(reference)
                return
            }
            break
        }
        throw InputError(
            file: self.files[reference.file],
            line: nil,
            message: "the file changed during the job (the row at byte \(reference.offset) no longer renders)"
        )
    }
}
