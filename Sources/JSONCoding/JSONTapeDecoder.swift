import Foundation

/// The `Decoder` of one value of a ``JSONTape``.
///
/// Coding paths are kept on the tape as a stack (`JSONTape.path`): a nested value's key is pushed while its
/// `init(from:)` runs, so decoding a field allocates no path; a decoder's path is the stack's first `depth`
/// keys, followed by the keys of the nested containers it was reached through.
package struct JSONTapeDecoder: Decoder {
  package let tape: JSONTape
  package let index: UInt32
  package let depth: Int
  package var nestedKeys: [any CodingKey] = []

  /// A decoder for the value at `index`, whose coding path is the tape's first `depth` keys and then
  /// `nestedKeys`.
  package init(tape: JSONTape, index: UInt32, depth: Int, nestedKeys: [any CodingKey] = []) {
    self.tape = tape
    self.index = index
    self.depth = depth
    self.nestedKeys = nestedKeys
  }

  package var codingPath: [any CodingKey] { tape.path.prefix(depth) + nestedKeys }
  package var userInfo: [CodingUserInfoKey: Any] { tape.userInfo }

  package func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    guard tape[index].kind == .object else { throw tape.mismatch([String: Int].self, at: index, path: codingPath) }
    return KeyedDecodingContainer(JSONObjectDecoder<Key>(decoder: self))
  }

  package func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    guard tape[index].kind == .array else { throw tape.mismatch([Int].self, at: index, path: codingPath) }
    guard !tape[index].isStreamed else { throw tape.streamedArrayRead(path: codingPath) }
    return JSONArrayDecoder(decoder: self)
  }

  package func singleValueContainer() throws -> any SingleValueDecodingContainer {
    JSONSingleValueDecoder(decoder: self)
  }

  /// A decoder for a value reached through a nested container of this one.
  package func nested(_ index: UInt32, key: any CodingKey) -> JSONTapeDecoder {
    JSONTapeDecoder(tape: tape, index: index, depth: depth, nestedKeys: nestedKeys + [key])
  }
}

extension JSONTape {
  /// The index of the value of the member called `name` in the object at `object`; the first when the
  /// object repeats it. An object of more than 16 members is looked up through a table made on first use.
  package func member(named name: String, of object: UInt32) -> UInt32? {
    let count = self[object].count
    if count > 16 {
      if let table = memberTables[object] { return table[name] }
      var table: [String: UInt32] = [:]
      var member = object + 1
      for _ in 0..<count {
        let name = string(at: member)
        if table[name] == nil { table[name] = member + 1 }
        member = self[member + 1].next
      }
      memberTables[object] = table
      return table[name]
    }
    // The name's bytes are read once, and each key's length is compared before its bytes.
    var name = name
    return name.withUTF8 { name in
      bytes.withUnsafeBufferPointer { bytes in
        entries.withUnsafeBufferPointer { entries in
          var member = Int(object) + 1
          for _ in 0..<count {
            let key = entries[member]
            if key.flag {
              if string(at: UInt32(member)) == String(decoding: name, as: UTF8.self) { return UInt32(member + 1) }
            } else if Int(key.end &- key.start) == name.count,
              name.isEmpty || memcmp(name.baseAddress!, bytes.baseAddress! + Int(key.start), name.count) == 0
            {
              return UInt32(member + 1)
            }
            member = Int(entries[member + 1].next)
          }
          return nil
        }
      }
    }
  }

  /// The error `JSONDecoder` throws for a member `key` the object at `path` does not have.
  package static func keyNotFound(_ key: some CodingKey, path: [any CodingKey]) -> DecodingError {
    .keyNotFound(
      key,
      .init(codingPath: path, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\").")
    )
  }

  // MARK: Values of each type

  package func mismatch(_ type: Any.Type, at index: UInt32, path: [any CodingKey]) -> DecodingError {
    let kind = self[index].kind
    if kind == .null {
      return .valueNotFound(
        type,
        .init(codingPath: path, debugDescription: "Expected \(type) value but found null instead.")
      )
    }
    return .typeMismatch(
      type,
      .init(codingPath: path, debugDescription: "Expected to decode \(type) but found \(kind) instead.")
    )
  }

  func decodeBool(at index: UInt32, path: @autoclosure () -> [any CodingKey]) throws -> Bool {
    switch self[index].kind {
    case .true: return true
    case .false: return false
    default: throw mismatch(Bool.self, at: index, path: path())
    }
  }

  package func decodeString(at index: UInt32, path: @autoclosure () -> [any CodingKey]) throws -> String {
    guard self[index].kind == .string else { throw mismatch(String.self, at: index, path: path()) }
    return string(at: index)
  }

  package func decodeInteger<Integer: FixedWidthInteger>(
    _ type: Integer.Type,
    at index: UInt32,
    path: @autoclosure () -> [any CodingKey]
  ) throws -> Integer {
    guard self[index].kind == .number else { throw mismatch(type, at: index, path: path()) }
    if Integer.isSigned {
      if let value = integer(at: index), let exact = Integer(exactly: value) { return exact }
    } else if let value = unsignedInteger(at: index), let exact = Integer(exactly: value) {
      return exact
    }
    // Written with a fraction or an exponent (`1.0`, `1e2`), as JSONDecoder accepts when the value is whole.
    if self[index].flag, let value = Double(numberText(at: index)), value.isFinite, let exact = Integer(exactly: value)
    {
      return exact
    }
    throw DecodingError.dataCorrupted(
      .init(codingPath: path(), debugDescription: "Number \(numberText(at: index)) does not fit in \(type).")
    )
  }

  func decodeFloat<Number: BinaryFloatingPoint & LosslessStringConvertible>(
    _ type: Number.Type,
    at index: UInt32,
    path: @autoclosure () -> [any CodingKey]
  ) throws -> Number {
    guard self[index].kind == .number else { throw mismatch(type, at: index, path: path()) }
    if !self[index].flag, self[index].end - self[index].start <= 15, let whole = integer(at: index) {
      return Number(whole)
    }
    guard let value = Number(numberText(at: index)), value.isFinite else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: path(), debugDescription: "Number \(numberText(at: index)) does not fit in \(type).")
      )
    }
    return value
  }

  /// Decodes any `Decodable` value: scalars directly, the types `JSONDecoder` treats specially (`Data` from
  /// Base64, `URL` from a string, `Decimal` from a number), anything else through its `init(from:)` with
  /// `key` pushed on the path.
  package func decodeValue<Value: Decodable>(
    _ type: Value.Type,
    at index: UInt32,
    key: any CodingKey,
    decoder: JSONTapeDecoder,
    fields: Bool = false
  ) throws -> Value {
    // Each `unsafeBitCast` below is taken only when `Value` is that very type, so it changes no bits.
    if Value.self == String.self {
      return unsafeBitCast(try decodeString(at: index, path: decoder.codingPath + [key]), to: Value.self)
    }
    if Value.self == Int.self {
      return unsafeBitCast(try decodeInteger(Int.self, at: index, path: decoder.codingPath + [key]), to: Value.self)
    }
    if Value.self == Bool.self {
      return unsafeBitCast(try decodeBool(at: index, path: decoder.codingPath + [key]), to: Value.self)
    }
    if Value.self == Double.self {
      return unsafeBitCast(try decodeFloat(Double.self, at: index, path: decoder.codingPath + [key]), to: Value.self)
    }
    if Value.self == Data.self {
      let text = try decodeString(at: index, path: decoder.codingPath + [key])
      guard let data = Data(base64Encoded: text) else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: decoder.codingPath + [key], debugDescription: "Encountered Data is not valid Base64.")
        )
      }
      return unsafeBitCast(data, to: Value.self)
    }
    if Value.self == URL.self {
      let text = try decodeString(at: index, path: decoder.codingPath + [key])
      guard let url = URL(string: text) else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: decoder.codingPath + [key], debugDescription: "Invalid URL string.")
        )
      }
      return unsafeBitCast(url, to: Value.self)
    }
    if Value.self == Decimal.self {
      guard self[index].kind == .number, let decimal = Decimal(string: numberText(at: index)) else {
        throw mismatch(Decimal.self, at: index, path: decoder.codingPath + [key])
      }
      return unsafeBitCast(decimal, to: Value.self)
    }
    if decoder.nestedKeys.isEmpty {
      path.removeSubrange(min(decoder.depth, path.count)...)
      path.append(key)
      defer { path.removeLast() }
      let valueDecoder = JSONTapeDecoder(tape: self, index: index, depth: path.count)
      return fields ? try valueDecoder.decode(type) : try Value(from: valueDecoder)
    }
    let valueDecoder = decoder.nested(index, key: key)
    return fields ? try valueDecoder.decode(type) : try Value(from: valueDecoder)
  }
}

/// The keyed container of an object.
struct JSONObjectDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
  let decoder: JSONTapeDecoder
  private var tape: JSONTape { decoder.tape }

  init(decoder: JSONTapeDecoder) {
    self.decoder = decoder
  }

  var codingPath: [any CodingKey] { decoder.codingPath }

  var allKeys: [Key] {
    var keys: [Key] = []
    var member = decoder.index + 1
    for _ in 0..<tape[decoder.index].count {
      if let key = Key(stringValue: tape.string(at: member)) { keys.append(key) }
      member = tape[member + 1].next
    }
    return keys
  }

  /// The index of `key`'s value; the first when the object repeats a key, as `JSONDecoder` decodes.
  func find(_ key: Key) -> UInt32? { find(named: key.stringValue) }

  /// The index of the value of the member called `name`; the first when the object repeats it.
  private func find(named name: String) -> UInt32? { tape.member(named: name, of: decoder.index) }

  func value(_ key: Key) throws -> UInt32 {
    guard let index = find(key) else { throw JSONTape.keyNotFound(key, path: codingPath) }
    return index
  }

  func contains(_ key: Key) -> Bool { find(key) != nil }

  func decodeNil(forKey key: Key) throws -> Bool { tape[try value(key)].kind == .null }

  func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
    try tape.decodeBool(at: try value(key), path: codingPath + [key])
  }
  func decode(_ type: String.Type, forKey key: Key) throws -> String {
    try tape.decodeString(at: try value(key), path: codingPath + [key])
  }
  func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
    try tape.decodeFloat(type, at: try value(key), path: codingPath + [key])
  }
  func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
    try tape.decodeFloat(type, at: try value(key), path: codingPath + [key])
  }
  func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
  func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
  func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
  func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
  func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
  func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
  func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
  func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
  func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
  func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

  private func integer<Integer: FixedWidthInteger>(_ type: Integer.Type, _ key: Key) throws -> Integer {
    try tape.decodeInteger(type, at: try value(key), path: codingPath + [key])
  }

  func decode<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value {
    try tape.decodeValue(type, at: try value(key), key: key, decoder: decoder)
  }

  func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
    guard let index = find(key), tape[index].kind != .null else { return nil }
    return try tape.decodeString(at: index, path: codingPath + [key])
  }
  func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
    guard let index = find(key), tape[index].kind != .null else { return nil }
    return try tape.decodeInteger(type, at: index, path: codingPath + [key])
  }
  func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
    guard let index = find(key), tape[index].kind != .null else { return nil }
    return try tape.decodeBool(at: index, path: codingPath + [key])
  }
  func decodeIfPresent<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value? {
    guard let index = find(key), tape[index].kind != .null else { return nil }
    return try tape.decodeValue(type, at: index, key: key, decoder: decoder)
  }

  func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type,
    forKey key: Key
  ) throws -> KeyedDecodingContainer<NestedKey> {
    try decoder.nested(try value(key), key: key).container(keyedBy: type)
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
    try decoder.nested(try value(key), key: key).unkeyedContainer()
  }

  func superDecoder() throws -> any Decoder {
    let key = JSONIndexKey(stringValue: "super")
    guard let index = find(named: "super") else {
      throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for super."))
    }
    return decoder.nested(index, key: key)
  }

  func superDecoder(forKey key: Key) throws -> any Decoder { decoder.nested(try value(key), key: key) }
}

/// The unkeyed container of an array.
struct JSONArrayDecoder: UnkeyedDecodingContainer {
  let decoder: JSONTapeDecoder
  private var tape: JSONTape { decoder.tape }
  private var next: UInt32
  private(set) var currentIndex = 0
  package let count: Int?

  init(decoder: JSONTapeDecoder) {
    self.decoder = decoder
    self.next = decoder.index + 1
    self.count = Int(decoder.tape[decoder.index].count)
  }

  var codingPath: [any CodingKey] { decoder.codingPath }
  var isAtEnd: Bool { currentIndex >= count! }

  private var elementKey: JSONIndexKey { JSONIndexKey(intValue: currentIndex) }

  /// The next element's index, moving past it.
  private mutating func element(_ type: Any.Type) throws -> UInt32 {
    guard !isAtEnd else {
      throw DecodingError.valueNotFound(
        type,
        .init(codingPath: codingPath + [elementKey], debugDescription: "Unkeyed container is at end.")
      )
    }
    let index = next
    next = tape[index].next
    currentIndex += 1
    return index
  }

  mutating func decodeNil() throws -> Bool {
    guard !isAtEnd else { return false }
    if tape[next].kind == .null {
      _ = try element(Never.self)
      return true
    }
    return false
  }

  mutating func decode(_ type: Bool.Type) throws -> Bool {
    let key = elementKey
    return try tape.decodeBool(at: try element(type), path: codingPath + [key])
  }
  mutating func decode(_ type: String.Type) throws -> String {
    let key = elementKey
    return try tape.decodeString(at: try element(type), path: codingPath + [key])
  }
  mutating func decode(_ type: Double.Type) throws -> Double {
    let key = elementKey
    return try tape.decodeFloat(type, at: try element(type), path: codingPath + [key])
  }
  mutating func decode(_ type: Float.Type) throws -> Float {
    let key = elementKey
    return try tape.decodeFloat(type, at: try element(type), path: codingPath + [key])
  }
  mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
  mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
  mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
  mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
  mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
  mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
  mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
  mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
  mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
  mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

  private mutating func integer<Integer: FixedWidthInteger>(_ type: Integer.Type) throws -> Integer {
    let key = elementKey
    return try tape.decodeInteger(type, at: try element(type), path: codingPath + [key])
  }

  mutating func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
    let key = elementKey
    return try tape.decodeValue(type, at: try element(type), key: key, decoder: decoder)
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type
  ) throws -> KeyedDecodingContainer<
    NestedKey
  > {
    let key = elementKey
    return try decoder.nested(try element(type), key: key).container(keyedBy: type)
  }

  mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
    let key = elementKey
    return try decoder.nested(try element([Int].self), key: key).unkeyedContainer()
  }

  mutating func superDecoder() throws -> any Decoder {
    let key = elementKey
    return decoder.nested(try element(Any.self), key: key)
  }
}

/// The single value container of a value.
struct JSONSingleValueDecoder: SingleValueDecodingContainer {
  let decoder: JSONTapeDecoder
  private var tape: JSONTape { decoder.tape }
  private var index: UInt32 { decoder.index }

  var codingPath: [any CodingKey] { decoder.codingPath }

  func decodeNil() -> Bool { tape[index].kind == .null }
  func decode(_ type: Bool.Type) throws -> Bool { try tape.decodeBool(at: index, path: codingPath) }
  func decode(_ type: String.Type) throws -> String { try tape.decodeString(at: index, path: codingPath) }
  func decode(_ type: Double.Type) throws -> Double { try tape.decodeFloat(type, at: index, path: codingPath) }
  func decode(_ type: Float.Type) throws -> Float { try tape.decodeFloat(type, at: index, path: codingPath) }
  func decode(_ type: Int.Type) throws -> Int { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: Int8.Type) throws -> Int8 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: Int16.Type) throws -> Int16 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: Int32.Type) throws -> Int32 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: Int64.Type) throws -> Int64 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: UInt.Type) throws -> UInt { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: UInt8.Type) throws -> UInt8 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: UInt16.Type) throws -> UInt16 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: UInt32.Type) throws -> UInt32 { try tape.decodeInteger(type, at: index, path: codingPath) }
  func decode(_ type: UInt64.Type) throws -> UInt64 { try tape.decodeInteger(type, at: index, path: codingPath) }

  /// A value wrapped in a single value container is decoded in its place, with the same path.
  func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
    if Value.self == String.self || Value.self == Int.self || Value.self == Bool.self || Value.self == Double.self
      || Value.self == Data.self || Value.self == URL.self || Value.self == Decimal.self
    {
      return try tape.decodeValue(type, at: index, key: JSONIndexKey(stringValue: ""), decoder: decoder)
    }
    return try Value(from: decoder)
  }
}
