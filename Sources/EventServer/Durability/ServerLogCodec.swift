import EventProtocol
import Foundation
import JSONCoding

/// How a ``ServerLogEntry`` becomes a record's bytes and back: a frame that tells a torn or damaged record
/// from a good one, and a format version that tells a newer build's record from a damaged one.
///
/// Frame: the format version (1 byte), the payload's length (4 bytes, little endian), the FNV-1a-64 digest
/// of the payload (8 bytes, little endian), then the payload (the entry's JSON).
///
/// ```swift
/// let bytes = try ServerLogCodec.encode(entry)
/// let back: ServerLogEntry<MyCommand> = try ServerLogCodec.decode(bytes, at: 1).get()
/// ```
public enum ServerLogCodec {
  /// The record format this build writes and reads.
  public static var currentVersion: UInt8 { 1 }
  /// The bytes before the payload.
  public static var headerLength: Int { 13 }

  /// What a record's bytes turned out to be.
  public enum Reading<Command: Codable & Sendable>: Sendable {
    /// A good entry.
    case entry(ServerLogEntry<Command>)
    /// Shorter than its frame says, or failing its checksum: a write the crash cut, or damage.
    case torn
  }

  /// Frames an entry.
  /// - Throws: ``ServerLogError/undecodable(_:)`` when the entry cannot be encoded.
  public static func encode<Command>(_ entry: ServerLogEntry<Command>) throws(ServerLogError) -> Data {
    let payload: Data
    do {
      payload = try WireJSON.encodeData(entry, sortedKeys: false)
    } catch {
      throw .undecodable("a log entry cannot be encoded: \(error)")
    }
    return frame(payload)
  }

  /// Frames a payload.
  public static func frame(_ payload: Data) -> Data {
    var bytes = Data(capacity: headerLength + payload.count)
    bytes.append(currentVersion)
    withUnsafeBytes(of: UInt32(payload.count).littleEndian) { bytes.append(contentsOf: $0) }
    withUnsafeBytes(of: digest(payload).littleEndian) { bytes.append(contentsOf: $0) }
    bytes.append(payload)
    return bytes
  }

  /// Reads a record's bytes.
  /// - Parameters:
  ///   - bytes: The record's bytes.
  ///   - position: Its position, for errors.
  /// - Returns: The entry, or ``Reading/torn`` when the frame is short or its checksum fails.
  /// - Throws: ``ServerLogError/newerFormat(found:supported:)`` for a record of a newer build (checked first:
  ///   its frame may differ), ``ServerLogError/undecodable(_:)`` for a good frame that holds no valid entry.
  public static func decode<Command>(
    _ bytes: Data,
    at position: UInt64
  ) throws(ServerLogError) -> Reading<Command> {
    guard let version = bytes.first else { return .torn }
    guard version <= currentVersion else { throw .newerFormat(found: Int(version), supported: Int(currentVersion)) }
    guard version >= 1, bytes.count >= headerLength else { return .torn }
    let start = bytes.startIndex
    let length = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[start + 1 + $1]) << (8 * $1) }
    let checksum = (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[start + 5 + $1]) << (8 * $1) }
    guard bytes.count - headerLength == Int(length) else { return .torn }
    let payload = bytes[(start + headerLength)...]
    guard digest(payload) == checksum else { return .torn }
    do {
      return .entry(try WireJSON.decode(ServerLogEntry<Command>.self, from: payload))
    } catch {
      throw .undecodable(SavedStateMismatch.describe(error, reading: "log record \(position)"))
    }
  }

  /// The payload of a frame ``frame(_:)`` made, when its format, length and checksum hold; `nil` otherwise.
  static func checkedPayload(of bytes: Data) -> Data? {
    guard let version = bytes.first, version >= 1, version <= currentVersion, bytes.count >= headerLength else {
      return nil
    }
    let start = bytes.startIndex
    let length = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[start + 1 + $1]) << (8 * $1) }
    let checksum = (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[start + 5 + $1]) << (8 * $1) }
    guard bytes.count - headerLength == Int(length) else { return nil }
    let payload = bytes[(start + headerLength)...]
    return digest(payload) == checksum ? Data(payload) : nil
  }

  static func digest(_ data: Data) -> UInt64 {
    FNV1a.hash(data)
  }
}
