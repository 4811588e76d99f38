import Foundation

/// The `Encoder` of one value being written into a ``JSONOutput``: the value sits at `depth` on its stack.
package struct JSONValueEncoder: Encoder {
  package let output: JSONOutput
  package let depth: Int

  /// The encoder of the value at `depth` on `output`'s stack.
  package init(output: JSONOutput, depth: Int) {
    self.output = output
    self.depth = depth
  }

  package var codingPath: [any CodingKey] { output.codingPath(depth) }
  package var userInfo: [CodingUserInfoKey: Any] { [:] }

  package func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    let serial = output.beginObject(at: depth)
    return KeyedEncodingContainer(JSONObjectEncoder<Key>(output: output, depth: depth, serial: serial))
  }

  package func unkeyedContainer() -> any UnkeyedEncodingContainer {
    JSONArrayEncoder(output: output, depth: depth, serial: output.beginArray(at: depth))
  }

  package func singleValueContainer() -> any SingleValueEncodingContainer {
    JSONSingleValueEncoder(output: output, depth: depth)
  }
}

extension JSONOutput {
  /// Writes a value of any `Encodable` type as the next value: the types `JSONEncoder` treats specially
  /// (`Data` as Base64, `URL` as its absolute string, `Decimal` as a number) first, then scalars without an
  /// encoder, then the value's own `encode(to:)` at a new depth.
  /// - Parameter fields: Whether a ``JSONFieldsCodable`` value writes its own fields (asked at the top of a
  ///   document and inside such values only: the check is a run-time conformance lookup, too dear for every
  ///   nested value of every type).
  package func encodeValue<Value: Encodable>(_ value: Value, key: (any CodingKey)?, fields: Bool = false) throws {
    if try writeScalar(value, key: key) { return }
    try encodeComposite(value, key: key, fields: fields)
  }

  /// Writes `value` when it is one of the types written without an encoder (the scalars, and the types
  /// `JSONEncoder` treats specially).
  /// - Parameter key: The value's key, when it is not yet on the coding path (for a non-finite number's error).
  /// - Returns: Whether it was; if not, nothing was written.
  @inline(__always)
  func writeScalar<Value: Encodable>(_ value: Value, key: @autoclosure () -> (any CodingKey)?) throws -> Bool {
    // Each `unsafeBitCast` below is taken only when `Value` is that very type, so it changes no bits.
    if Value.self == String.self {
      write(unsafeBitCast(value, to: String.self))
    } else if Value.self == Int.self {
      write(Int64(unsafeBitCast(value, to: Int.self)))
    } else if Value.self == Bool.self {
      write(unsafeBitCast(value, to: Bool.self))
    } else if Value.self == Double.self {
      try write(unsafeBitCast(value, to: Double.self), codingPath: codingPath(open.count) + [key()].compactMap { $0 })
    } else if Value.self == Data.self {
      write(unsafeBitCast(value, to: Data.self).base64EncodedString())
    } else if Value.self == URL.self {
      write(unsafeBitCast(value, to: URL.self).absoluteString)
    } else if Value.self == Decimal.self {
      bytes.append(contentsOf: unsafeBitCast(value, to: Decimal.self).description.utf8)
    } else {
      return false
    }
    return true
  }

  /// Writes a value that is not a scalar through its own `encode(to:)`, at a new depth whose key is `key`.
  func encodeComposite<Value: Encodable>(_ value: Value, key: (any CodingKey)?, fields: Bool = false) throws {
    let depth = pushValue(key: key)
    if let dictionary = stringKeyedDictionary(value) {
      try dictionary.writeMembers(into: self, at: depth)
    } else {
      let encoder = JSONValueEncoder(output: self, depth: depth)
      if fields { try encoder.encode(value) } else { try value.encode(to: encoder) }
    }
    closeValues(downTo: depth)
  }
}

/// The keyed container of an object being written.
struct JSONObjectEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
  let output: JSONOutput
  let depth: Int
  let serial: UInt32

  var codingPath: [any CodingKey] { output.codingPath(depth) }

  private func member(_ key: Key) throws {
    try output.beginMember(key.stringValue, at: depth, serial: serial)
  }

  mutating func encodeNil(forKey key: Key) throws {
    try member(key)
    output.writeNull()
  }
  mutating func encode(_ value: Bool, forKey key: Key) throws {
    try member(key)
    output.write(value)
  }
  mutating func encode(_ value: String, forKey key: Key) throws {
    try member(key)
    output.write(value)
  }
  mutating func encode(_ value: Double, forKey key: Key) throws {
    try member(key)
    try output.write(value, codingPath: codingPath + [key])
  }
  mutating func encode(_ value: Float, forKey key: Key) throws {
    try member(key)
    try output.write(value, codingPath: codingPath + [key])
  }
  mutating func encode(_ value: Int, forKey key: Key) throws {
    try member(key)
    output.write(Int64(value))
  }
  mutating func encode(_ value: Int8, forKey key: Key) throws { try encode(Int(value), forKey: key) }
  mutating func encode(_ value: Int16, forKey key: Key) throws { try encode(Int(value), forKey: key) }
  mutating func encode(_ value: Int32, forKey key: Key) throws { try encode(Int(value), forKey: key) }
  mutating func encode(_ value: Int64, forKey key: Key) throws { try encode(Int(value), forKey: key) }
  mutating func encode(_ value: UInt, forKey key: Key) throws {
    try member(key)
    output.write(UInt64(value))
  }
  mutating func encode(_ value: UInt8, forKey key: Key) throws { try encode(UInt(value), forKey: key) }
  mutating func encode(_ value: UInt16, forKey key: Key) throws { try encode(UInt(value), forKey: key) }
  mutating func encode(_ value: UInt32, forKey key: Key) throws { try encode(UInt(value), forKey: key) }
  mutating func encode(_ value: UInt64, forKey key: Key) throws { try encode(UInt(value), forKey: key) }

  mutating func encode<Value: Encodable>(_ value: Value, forKey key: Key) throws {
    try member(key)
    // A scalar needs no place on the coding path: its key is not made an existential (see `pathKey`).
    if try output.writeScalar(value, key: Self.pathKey(key)) { return }
    try output.encodeComposite(value, key: Self.pathKey(key))
  }

  /// `key` as the coding path holds it: itself when it fits an existential's inline buffer (three words), else
  /// a ``JSONIndexKey`` of its name. `Dictionary`'s own key (a `String` and an `Int?`, 25 bytes) would be
  /// copied into a heap box for each of its values; its name is what a coding path shows of it.
  private static func pathKey(_ key: Key) -> any CodingKey {
    MemoryLayout<Key>.size <= 3 * MemoryLayout<Int>.size ? key : JSONIndexKey(stringValue: key.stringValue)
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy keyType: NestedKey.Type,
    forKey key: Key
  ) -> KeyedEncodingContainer<NestedKey> {
    nestedEncoder(forKey: key).container(keyedBy: keyType)
  }

  mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
    nestedEncoder(forKey: key).unkeyedContainer()
  }

  mutating func superEncoder() -> any Encoder { nestedEncoder(forKey: JSONIndexKey(stringValue: "super")) }

  mutating func superEncoder(forKey key: Key) -> any Encoder { nestedEncoder(forKey: key) }

  /// Starts a member whose value a nested container or encoder writes; it stays open until a shallower
  /// container writes again or the object's value ends.
  private func nestedEncoder(forKey key: some CodingKey) -> JSONValueEncoder {
    do {
      try output.beginMember(key.stringValue, at: depth, serial: serial)
    } catch {
      preconditionFailure("a nested container was asked of an object already written: \(error)")
    }
    return JSONValueEncoder(output: output, depth: output.pushValue(key: key))
  }
}

/// The unkeyed container of an array being written.
struct JSONArrayEncoder: UnkeyedEncodingContainer {
  let output: JSONOutput
  let depth: Int
  let serial: UInt32
  package private(set) var count = 0

  init(output: JSONOutput, depth: Int, serial: UInt32) {
    self.output = output
    self.depth = depth
    self.serial = serial
  }

  var codingPath: [any CodingKey] { output.codingPath(depth) }

  private mutating func element() throws {
    count = try output.beginElement(at: depth, serial: serial) + 1
  }

  mutating func encodeNil() throws {
    try element()
    output.writeNull()
  }
  mutating func encode(_ value: Bool) throws {
    try element()
    output.write(value)
  }
  mutating func encode(_ value: String) throws {
    try element()
    output.write(value)
  }
  mutating func encode(_ value: Double) throws {
    try element()
    try output.write(value, codingPath: codingPath + [JSONIndexKey(intValue: count - 1)])
  }
  mutating func encode(_ value: Float) throws {
    try element()
    try output.write(value, codingPath: codingPath + [JSONIndexKey(intValue: count - 1)])
  }
  mutating func encode(_ value: Int) throws {
    try element()
    output.write(Int64(value))
  }
  mutating func encode(_ value: Int8) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int16) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int32) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int64) throws { try encode(Int(value)) }
  mutating func encode(_ value: UInt) throws {
    try element()
    output.write(UInt64(value))
  }
  mutating func encode(_ value: UInt8) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt16) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt32) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt64) throws { try encode(UInt(value)) }

  mutating func encode<Value: Encodable>(_ value: Value) throws {
    try element()
    try output.encodeValue(value, key: JSONIndexKey(intValue: count - 1))
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy keyType: NestedKey.Type
  ) -> KeyedEncodingContainer<
    NestedKey
  > {
    nestedEncoder().container(keyedBy: keyType)
  }

  mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { nestedEncoder().unkeyedContainer() }

  mutating func superEncoder() -> any Encoder { nestedEncoder() }

  private mutating func nestedEncoder() -> JSONValueEncoder {
    do {
      try element()
    } catch {
      preconditionFailure("a nested container was asked of an array already written: \(error)")
    }
    return JSONValueEncoder(output: output, depth: output.pushValue(key: JSONIndexKey(intValue: count - 1)))
  }
}

/// The single value container of a value being written.
struct JSONSingleValueEncoder: SingleValueEncodingContainer {
  let output: JSONOutput
  let depth: Int

  var codingPath: [any CodingKey] { output.codingPath(depth) }

  mutating func encodeNil() throws {
    try output.beginSingleValue(at: depth)
    output.writeNull()
  }
  mutating func encode(_ value: Bool) throws {
    try output.beginSingleValue(at: depth)
    output.write(value)
  }
  mutating func encode(_ value: String) throws {
    try output.beginSingleValue(at: depth)
    output.write(value)
  }
  mutating func encode(_ value: Double) throws {
    try output.beginSingleValue(at: depth)
    try output.write(value, codingPath: codingPath)
  }
  mutating func encode(_ value: Float) throws {
    try output.beginSingleValue(at: depth)
    try output.write(value, codingPath: codingPath)
  }
  mutating func encode(_ value: Int) throws {
    try output.beginSingleValue(at: depth)
    output.write(Int64(value))
  }
  mutating func encode(_ value: Int8) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int16) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int32) throws { try encode(Int(value)) }
  mutating func encode(_ value: Int64) throws { try encode(Int(value)) }
  mutating func encode(_ value: UInt) throws {
    try output.beginSingleValue(at: depth)
    output.write(UInt64(value))
  }
  mutating func encode(_ value: UInt8) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt16) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt32) throws { try encode(UInt(value)) }
  mutating func encode(_ value: UInt64) throws { try encode(UInt(value)) }

  /// A value wrapped in a single value container is written in its place, at the same depth.
  mutating func encode<Value: Encodable>(_ value: Value) throws {
    guard output.open.count > depth, output.open[depth].kind == .pending else {
      throw EncodingError.invalidValue(
        value,
        .init(codingPath: codingPath, debugDescription: "a single value container encoded a second value")
      )
    }
    if Value.self == String.self || Value.self == Int.self || Value.self == Bool.self || Value.self == Double.self
      || Value.self == Data.self || Value.self == URL.self || Value.self == Decimal.self
    {
      try output.beginSingleValue(at: depth)
      return try output.encodeValue(value, key: nil)
    }
    try value.encode(to: JSONValueEncoder(output: output, depth: depth))
  }
}

/// A coding key made of an array index or a string, for coding paths and `super`; an index's text is made
/// only when asked for.
package struct JSONIndexKey: CodingKey {
  /// One or the other: an enum of the two is 17 bytes, so the key fits in an existential's inline buffer and
  /// pushing one on a coding path (every element of every array) allocates nothing; a `String?` beside an
  /// `Int?` (25 bytes) was boxed on the heap each time.
  private enum Storage {
    case index(Int)
    case name(String)
  }

  private let storage: Storage

  package var intValue: Int? {
    if case .index(let index) = storage { index } else { nil }
  }

  package var stringValue: String {
    switch storage {
    case .index(let index): "Index \(index)"
    case .name(let name): name
    }
  }

  package init(stringValue: String) {
    storage = .name(stringValue)
  }

  package init(intValue: Int) {
    storage = .index(intValue)
  }
}
