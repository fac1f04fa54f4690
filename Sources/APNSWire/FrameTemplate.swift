import NIOCore

/// One job's notification frame, encoded once; each notification then costs a copy and two patches.
///
/// A bulk send repeats one payload, expiry and priority over millions of tokens, so the frame is encoded
/// and validated once here. `write(token:identifier:to:)` copies the encoded bytes into the caller's buffer
/// and overwrites the token and identifier fields, in one unsafe write: no allocation, no lock, no check
/// beyond the buffer's capacity. Immutable and `Sendable`: every shard may share one template.
public struct FrameTemplate: Sendable {
    @usableFromInline let layout: FrameLayout
    @usableFromInline let bytes: [UInt8]

    /// The command this template encodes.
    public var command: FrameCommand { self.layout.command }
    /// The size of every frame this template writes.
    public var frameByteCount: Int { self.layout.byteCount }
    /// The payload, as it stands in every frame.
    public let payload: Payload
    public let expiry: UInt32
    public let priority: NotificationPriority

    /// Encodes the frame for `payload` in the layout of `command`.
    ///
    /// - Throws: `PayloadError` when the payload is over the command's limit, when `priority` is not one
    ///   the binary interface knows (5 or 10), or when priority 10 meets a payload whose `aps` holds only
    ///   `content-available` (commands 0 and 1 imply priority 10).
    public init(
        command: FrameCommand,
        payload: Payload,
        expiry: UInt32 = 0,
        priority: NotificationPriority = .immediate
    ) throws(PayloadError) {
        try payload.check(limit: command.payloadLimit)
        let effectivePriority = command == .framed ? priority : .immediate
        guard effectivePriority.isValidForBinary else {
            throw PayloadError(.invalidPriority, "priority \(priority.rawValue) is not 5 or 10")
        }
        try payload.check(priority: effectivePriority)
        let layout = FrameLayout(command: command, payloadCount: payload.byteCount)
        var bytes = [UInt8](repeating: 0, count: layout.byteCount)
        bytes.withUnsafeMutableBytes { out in
            payload.bytes.withUnsafeBytes { payloadBytes in
                layout.encode(
                    into: out,
                    token: DeviceToken(words: (0, 0, 0, 0)),
                    payload: payloadBytes,
                    identifier: 0,
                    expiry: expiry,
                    priority: effectivePriority.rawValue
                )
            }
        }
        self.layout = layout
        self.bytes = bytes
        self.payload = payload
        self.expiry = expiry
        self.priority = effectivePriority
    }

    /// Appends the frame for `token` with `identifier` to `buffer` (command 0 ignores the identifier).
    ///
    /// Allocates only when `buffer` lacks room or shares its storage; a sender keeps one uniquely held,
    /// preallocated buffer per connection so that neither happens in steady state.
    @inlinable
    public func write(token: DeviceToken, identifier: UInt32, to buffer: inout ByteBuffer) {
        _ = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: self.bytes.count) { out in
            self.write(token: token, identifier: identifier, into: out)
        }
    }

    /// Writes the frame for `token` with `identifier` at the start of `out` (at least `frameByteCount` bytes: checked)
    /// and returns its size. For a sender that writes a batch of frames into memory it took once for the batch
    /// (`ByteBuffer.withUnsafeMutableWritableBytes`): a `ByteBuffer` written per frame checks its storage per frame.
    @inlinable @inline(__always)
    public func write(token: DeviceToken, identifier: UInt32, into out: UnsafeMutableRawBufferPointer) -> Int {
        let layout = self.layout
        return self.bytes.withUnsafeBytes { template in
            precondition(out.count >= template.count, "no room for the frame")
            out.baseAddress!.copyMemory(from: template.baseAddress!, byteCount: template.count)
            layout.patch(out, token: token)
            if layout.identifierOffset >= 0 {
                out.storeBytes(of: identifier.bigEndian, toByteOffset: layout.identifierOffset, as: UInt32.self)
            }
            return template.count
        }
    }

    /// The size of a frame of this command around a payload of `payloadCount` bytes.
    @inlinable
    public func frameByteCount(payloadCount: Int) -> Int {
        FrameLayout(command: self.layout.command, payloadCount: payloadCount).byteCount
    }

    /// Writes every field of the frame for `token` with `identifier` and a payload of `payloadCount` bytes but the
    /// payload's bytes at the start of `out` (room for the frame: checked), with the template's expiry and priority;
    /// returns the frame's layout.
    @inlinable @inline(__always)
    func writeFields(
        token: DeviceToken,
        identifier: UInt32,
        payloadCount: Int,
        into out: UnsafeMutableRawBufferPointer
    ) -> FrameLayout {
        let layout = FrameLayout(command: self.layout.command, payloadCount: payloadCount)
        precondition(out.count >= layout.byteCount, "no room for the frame")
        layout.encodeFields(
            into: out,
            token: token,
            identifier: identifier,
            expiry: self.expiry,
            priority: self.priority.rawValue
        )
        return layout
    }

    /// Writes the frame for `token` with `identifier` and the payload `payload` (a row's own, already rendered) at
    /// the start of `out` (room for the frame: checked); returns the frame's size. The template's expiry and
    /// priority.
    @inlinable @inline(__always)
    public func write(
        token: DeviceToken,
        identifier: UInt32,
        payload: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    ) -> Int {
        let layout = self.writeFields(token: token, identifier: identifier, payloadCount: payload.count, into: out)
        if payload.count > 0 {
            (out.baseAddress! + layout.payloadOffset).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        }
        return layout.byteCount
    }

    /// Appends the frame for `token` with `identifier` whose payload is `payload` rendered with `fields`, which
    /// `PayloadTemplates.measure` found to be `payloadCount` bytes; returns the frame's size. The template's
    /// expiry and priority; the payload is rendered straight into `buffer`: no allocation when `buffer` has room.
    @inlinable
    @discardableResult
    public func write(
        token: DeviceToken,
        identifier: UInt32,
        payload: PayloadTemplate,
        fields: PayloadFields,
        payloadCount: Int,
        to buffer: inout ByteBuffer
    ) -> Int {
        let byteCount = self.frameByteCount(payloadCount: payloadCount)
        return buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: byteCount) { out in
            self.write(
                token: token,
                identifier: identifier,
                payload: payload,
                fields: fields,
                payloadCount: payloadCount,
                into: out
            )
        }
    }

    /// `write(token:identifier:payload:fields:payloadCount:to:)` at the start of `out` (room for the frame: checked),
    /// for a batch written into memory taken once (see `write(token:identifier:into:)`).
    @inlinable @inline(__always)
    public func write(
        token: DeviceToken,
        identifier: UInt32,
        payload: PayloadTemplate,
        fields: PayloadFields,
        payloadCount: Int,
        into out: UnsafeMutableRawBufferPointer
    ) -> Int {
        let layout = self.writeFields(token: token, identifier: identifier, payloadCount: payloadCount, into: out)
        let area = UnsafeMutableRawBufferPointer(
            rebasing: out[layout.payloadOffset..<(layout.payloadOffset + payloadCount)]
        )
        let written = payload.render(fields, into: area)
        precondition(written == payloadCount, "the fields changed since they were measured")
        return layout.byteCount
    }
}
