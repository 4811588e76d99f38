import EventProtocol
import Foundation
import Hummingbird

/// Reading a request's fields (query parameters, form bodies) into typed values, refusing bad ones with
/// `BAD_REQUEST` naming the field.
public struct RequestFields {
  private let fields: [String: String]

  init(_ fields: [String: String]) {
    self.fields = fields
  }

  /// The query parameters of `request` (the first value of each name), refusing any name not in `allowed`:
  /// a misspelt parameter is an error, not silently ignored.
  ///
  /// The query is read as `application/x-www-form-urlencoded`, as browsers and HTTP libraries send it
  /// (Python `requests`' `params=`, `URLComponents` with `+` left as it is): `+` is a space, `%2B` a plus.
  public init(query request: Request, allowed: Set<String>) throws(EventAPIError) {
    try self.init(query: request.uri.query ?? "", allowed: allowed)
  }

  /// The parameters of a raw query string (without its `?`), read as ``init(query:allowed:)`` reads a
  /// request's.
  public init(query: String, allowed: Set<String>) throws(EventAPIError) {
    var fields: [String: String] = [:]
    for (name, value) in try Self.pairs(query, what: "query") where fields[name] == nil {
      guard allowed.contains(name) else {
        throw .badRequest(
          "Unknown parameter '\(name.prefix(40))'; this request takes \(allowed.sorted().joined(separator: ", "))"
        )
      }
      fields[name] = value
    }
    self.init(fields)
  }

  /// An `application/x-www-form-urlencoded` body.
  public init(form body: String) throws(EventAPIError) {
    var fields: [String: String] = [:]
    for (name, value) in try Self.pairs(body, what: "form") where fields[name] == nil {
      fields[name] = value
    }
    self.init(fields)
  }

  /// The name-value pairs of `application/x-www-form-urlencoded` text, in order.
  private static func pairs(_ text: String, what: String) throws(EventAPIError) -> [(String, String)] {
    var pairs: [(String, String)] = []
    for pair in text.split(separator: "&") where !pair.isEmpty {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "") else {
        throw .badRequest("the \(what) is not valid x-www-form-urlencoded")
      }
      pairs.append((name, value))
    }
    return pairs
  }

  /// One name or value of `application/x-www-form-urlencoded` text: `+` is a space and `%XX` a byte; `nil`
  /// for a `%` not followed by two hex digits, or bytes that are not UTF-8. (Decoded here byte by byte: it
  /// runs for every field of every poll, and Foundation's `removingPercentEncoding` was a tenth of a short
  /// poll's CPU.)
  static func decode(_ part: Substring) -> String? {
    let utf8 = part.utf8
    guard utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else { return String(part) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index != utf8.endIndex {
      let byte = utf8[index]
      utf8.formIndex(after: &index)
      switch byte {
      case UInt8(ascii: "+"):
        bytes.append(UInt8(ascii: " "))
      case UInt8(ascii: "%"):
        guard index != utf8.endIndex, let high = hexValue(utf8[index]) else { return nil }
        utf8.formIndex(after: &index)
        guard index != utf8.endIndex, let low = hexValue(utf8[index]) else { return nil }
        utf8.formIndex(after: &index)
        bytes.append(high << 4 | low)
      default:
        bytes.append(byte)
      }
    }
    // Bytes that are not UTF-8 are refused (Foundation's decoder on Linux repaired some such texts with U+FFFD
    // and refused others).
    return String(validating: bytes, as: UTF8.self)
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  public func string(_ name: String) -> String? { fields[name] }

  public func required(_ name: String) throws(EventAPIError) -> String {
    guard let value = fields[name], !value.isEmpty else { throw .badRequest("Missing '\(name)' argument") }
    return value
  }

  public func int(_ name: String, in range: ClosedRange<Int>) throws(EventAPIError) -> Int? {
    guard let text = fields[name] else { return nil }
    guard let value = Int(text), range.contains(value) else {
      throw .badRequest(
        "Invalid '\(name)': \(text.prefix(40)) is not an integer in \(range.lowerBound)...\(range.upperBound)"
      )
    }
    return value
  }

  /// One of a fixed set of names (an enum's raw values), or `nil` when the field is absent.
  public func choice<Choice: RawRepresentable & CaseIterable>(
    _ name: String,
    as type: Choice.Type
  ) throws(EventAPIError) -> Choice? where Choice.RawValue == String {
    guard let text = fields[name] else { return nil }
    guard let choice = Choice(rawValue: text) else {
      let names = Choice.allCases.map(\.rawValue).joined(separator: ", ")
      throw .badRequest("Invalid '\(name)': \(text.prefix(40)) is not one of \(names)")
    }
    return choice
  }

  public func bool(_ name: String) throws(EventAPIError) -> Bool? {
    guard let text = fields[name] else { return nil }
    switch text.lowercased() {
    case "true", "1": return true
    case "false", "0": return false
    default: throw .badRequest("Invalid '\(name)': expected true or false")
    }
  }

  /// A JSON array of event types in a field value, as Zulip's `event_types`: at most 256, each matching
  /// `^[a-z][a-z0-9_]{0,63}$` (as `Server/openapi.yaml` says).
  public func eventTypes(_ name: String) throws(EventAPIError) -> Set<String>? {
    // `null` (what Zulip's Python client sends for "every type") is the same as no field.
    guard let text = fields[name], text != "null" else { return nil }
    guard let strings = try? JSONDecoder().decode([String].self, from: Data(text.utf8)), strings.count <= 256,
      strings.allSatisfy(Self.isEventType)
    else {
      throw .badRequest(
        "Invalid '\(name)': expected a JSON array of at most 256 event types, each [a-z][a-z0-9_]* of at most 64 bytes"
      )
    }
    return Set(strings)
  }

  private static func isEventType(_ type: String) -> Bool {
    guard (1...64).contains(type.utf8.count), let first = type.utf8.first,
      (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
    else { return false }
    return type.utf8.allSatisfy { byte in
      (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        || byte == UInt8(ascii: "_")
    }
  }
}
