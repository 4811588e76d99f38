/// A dictionary with `String` keys, which the coder writes as an object member by member, without the
/// keyed container `Dictionary`'s `encode(to:)` goes through: that path makes a coding key of each key
/// (a dynamic cast of the key to `String` and a key value copied through its witnesses), and calls the
/// container through its type-erasing box, per entry. Foundation's `JSONEncoder` treats these dictionaries
/// apart in the same way. The bytes are those of the `Codable` path: the members in the dictionary's order
/// (sorted where the output sorts keys), each value encoded as a keyed container's `encode(_:forKey:)` does,
/// under the key's name on the coding path.
protocol JSONStringKeyedDictionary {
  /// Writes the entries as the members of the object at `depth`.
  func writeMembers(into output: JSONOutput, at depth: Int) throws
}

extension Dictionary: JSONStringKeyedDictionary where Key == String, Value: Encodable {
  func writeMembers(into output: JSONOutput, at depth: Int) throws {
    let serial = output.beginObject(at: depth)
    for (key, value) in self {
      try output.beginMember(key, at: depth, serial: serial)
      if try output.writeScalar(value, key: JSONIndexKey(stringValue: key)) { continue }
      try output.encodeComposite(value, key: JSONIndexKey(stringValue: key))
    }
  }
}

extension JSONOutput {
  /// `value` as a ``JSONStringKeyedDictionary``, or `nil`. The last type found not to be one is remembered,
  /// so that a run of values of one type (an array's elements) asks the runtime once.
  @inline(__always) func stringKeyedDictionary<Value>(_ value: Value) -> (any JSONStringKeyedDictionary)? {
    let type = ObjectIdentifier(Value.self)
    if type == lastTypeNotStringKeyed { return nil }
    if let dictionary = value as? any JSONStringKeyedDictionary { return dictionary }
    lastTypeNotStringKeyed = type
    return nil
  }
}
