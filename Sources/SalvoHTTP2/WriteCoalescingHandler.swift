import NIOCore

/// Gathers the bytes written between two flushes into one buffer, so that TLS seals one record per 16 KiB rather
/// than one per write.
///
/// NIOHTTP2 writes every frame on its own, and a DATA frame as two writes (its header, then the payload); NIOSSL
/// turns each write into its own TLS record. A request is then three records (about 60, 9 and 100 bytes), each
/// with its own header, tag and AEAD call, and the server decrypts them one by one. Copying a request's ~170
/// bytes once costs much less. Sits between `NIOSSLHandler` and `NIOHTTP2Handler`; the order of writes is kept,
/// and the promises of gathered writes complete with the one write that carries them.
///
/// Confined to its channel's event loop.
final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var buffer: ByteBuffer?
    private var promise: EventLoopPromise<Void>?
    /// A buffer that grew past this (a very large batch) is not kept for the next flush.
    private let keptCapacity = 256 << 10

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .byteBuffer(var bytes):
            if self.buffer == nil {
                self.buffer = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 16 << 10))
            }
            self.buffer!.writeBuffer(&bytes)
            if let promise {
                if let pending = self.promise {
                    pending.futureResult.cascade(to: promise)
                } else {
                    self.promise = promise
                }
            }
        case .fileRegion:
            self.writeGathered(context: context)
            context.write(data, promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        self.writeGathered(context: context)
        context.flush()
        // NIOSSL has encrypted the bytes by now and let go of them: the buffer is reused without a copy.
        if let capacity = self.buffer?.capacity, capacity > self.keptCapacity {
            self.buffer = nil
        } else {
            self.buffer?.clear()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Written, not flushed: the layers below decide what becomes of unflushed writes on close, as they would
        // without this handler.
        self.writeGathered(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.writeGathered(context: context)
    }

    private func writeGathered(context: ChannelHandlerContext) {
        guard let buffer = self.buffer, buffer.readableBytes > 0 else {
            // Only empty writes carried these promises.
            let promise = self.promise
            self.promise = nil
            promise?.succeed()
            return
        }
        let promise = self.promise
        self.promise = nil
        context.write(self.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        self.buffer!.moveReaderIndex(to: self.buffer!.writerIndex)
    }
}
