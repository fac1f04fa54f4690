import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array whose elements may be NULL, in the binary format: what a cycle's column binds
/// when some rows have no value (a notification without a topic, an outcome without a reason). PostgresNIO encodes
/// arrays of values only.
struct PostgresNullableArray<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>:
    PostgresNonThrowingEncodable
{
    var elements: [Element?]

    init(_ elements: [Element?]) { self.elements = elements }

    static var psqlType: PostgresDataType { Element.psqlArrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer,
        context: PostgresEncodingContext<JSONEncoder>
    ) {
        // Dimensions (0 for an empty array), whether any element is NULL, the elements' type.
        buffer.writeInteger(self.elements.isEmpty ? 0 : 1, as: Int32.self)
        buffer.writeInteger(self.elements.contains { $0 == nil } ? 1 : 0, as: Int32.self)
        buffer.writeInteger(Element.psqlType.rawValue)
        guard !self.elements.isEmpty else { return }
        // The one dimension's length and lower bound.
        buffer.writeInteger(Int32(self.elements.count))
        buffer.writeInteger(1, as: Int32.self)
        for element in self.elements {
            guard let element else {
                // A NULL element: length -1, no bytes.
                buffer.writeInteger(-1, as: Int32.self)
                continue
            }
            let lengthIndex = buffer.writerIndex
            buffer.writeInteger(0, as: Int32.self)
            let start = buffer.writerIndex
            element.encode(into: &buffer, context: context)
            buffer.setInteger(Int32(buffer.writerIndex - start), at: lengthIndex)
        }
    }
}
