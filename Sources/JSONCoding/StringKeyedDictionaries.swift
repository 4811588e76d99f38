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
    if Value.self == String.self {
      // Taken only when `Value` is `String`, so the cast changes no bits. Iterated as its concrete type:
      // the generic loop moved each entry through the value type's witnesses.
      for (key, value) in unsafeBitCast(self, to: [String: String].self) {
        try output.writeStringMember(key, value, at: depth, serial: serial)
      }
      return
    }
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

  /// Writes the member `key` with the string `value` into the object `serial` at `depth`, as ``beginMember(_:at:serial:)``
  /// and ``write(_:)-(String)`` would: in one copy into room made for it when neither needs an escape.
  func writeStringMember(_ key: String, _ value: String, at depth: Int, serial: UInt32) throws {
    var key = key
    var value = value
    let written = try key.withUTF8 { key in
      try value.withUTF8 { value in
        guard Self.needsNoEscape(key), Self.needsNoEscape(value) else { return false }
        let separated = try countMember(at: depth, serial: serial)
        var wroteMember = false
        appendInPlace(of: key, most: key.count + value.count + 6, wroteMember: &wroteMember) { member in
          if separated { member.put(UInt8(ascii: ",")) }
          member.plainString(key)
          member.put(UInt8(ascii: ":"))
          member.plainString(value)
        }
        return true
      }
    }
    if written { return }
    try beginMember(key, at: depth, serial: serial)
    write(value)
  }
}
