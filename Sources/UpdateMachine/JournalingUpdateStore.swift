import EventProtocol
import Foundation

/// A store that, besides the whole record, keeps a journal of small entries appended after it, so a save
/// after a batch of events costs in proportion to the batch, not to the state.
///
/// The machine writes the whole record with ``UpdateStore/save(_:)`` now and then (which starts an empty
/// journal bound to that record), and after each batch in between appends one entry: the events applied and
/// the rest of the record (finger, timestamps, outbox). On launch it reads the record, then the journal, and
/// replays the entries through the reducer. Atomicity is the same as a whole save's: an entry is durable when
/// ``appendToJournal(_:)`` returns, and a crash in the middle of an append leaves a torn tail that
/// ``loadJournal(after:)`` detects (by length and checksum) and drops; a journal left from an older record is
/// ignored. Nothing acknowledged to the server is lost, because the machine acknowledges a batch only in the
/// poll after its save.
///
/// ``FileStore`` and ``InMemoryStore`` are journaling stores. A custom store that only conforms to
/// ``UpdateStore`` gets whole saves, as before.
public protocol JournalingUpdateStore: UpdateStore {
  /// Appends one entry after the stored record and the entries before it, durably.
  /// - Throws: ``PersistenceError`` when the write fails, or when there is no journal bound to the stored
  ///   record (nothing saved yet, or the journal was removed); the machine then saves the whole record.
  func appendToJournal(_ entry: Data) throws(PersistenceError)

  /// The entries appended after `record` (the bytes ``UpdateStore/load()`` returned), oldest first, or `nil`
  /// when no journal is bound to it. A torn or damaged tail is dropped, and cut off so later entries follow
  /// the last good one.
  /// - Throws: ``PersistenceError`` when the journal cannot be read.
  func loadJournal(after record: Data) throws(PersistenceError) -> [Data]?
}

/// The bytes of a journal: a header binding it to one record, then framed entries.
///
/// Header: `UMJ1` and the FNV-1a-64 digest of the record's bytes. Each entry: its length (4 bytes, little
/// endian), the FNV-1a-64 digest of its bytes (8 bytes, little endian), then the bytes.
enum JournalFormat {
  static let magic = Data("UMJ1".utf8)
  static let headerLength = 12
  static let frameHeaderLength = 12

  /// The header of a journal bound to `record`.
  static func header(for record: Data) -> Data {
    magic + littleEndian(digest(record))
  }

  /// One entry, framed.
  static func frame(_ entry: Data) -> Data {
    littleEndian(UInt32(entry.count)) + littleEndian(digest(entry)) + entry
  }

  /// The entries of `journal` when it is bound to `record`, and how many of its bytes are good; `nil` when
  /// it is bound to another record (or has no valid header).
  static func parse(_ journal: Data, boundTo record: Data) -> (entries: [Data], goodLength: Int)? {
    let bytes = [UInt8](journal)
    guard bytes.count >= headerLength, Data(bytes[0..<4]) == magic,
      readUInt64(bytes, at: 4) == digest(record)
    else { return nil }
    var entries: [Data] = []
    var offset = headerLength
    while bytes.count - offset >= frameHeaderLength {
      let length = Int(readUInt32(bytes, at: offset))
      let start = offset + frameHeaderLength
      guard length <= bytes.count - start else { break }
      let entry = Data(bytes[start..<start + length])
      guard readUInt64(bytes, at: offset + 4) == digest(entry) else { break }
      entries.append(entry)
      offset = start + length
    }
    return (entries, offset)
  }

  /// FNV-1a, 64 bits: enough to tell a torn or stale journal from a good one (not a defence against
  /// tampering).
  static func digest(_ data: Data) -> UInt64 {
    FNV1a.hash(data)
  }

  private static func littleEndian(_ value: some FixedWidthInteger) -> Data {
    withUnsafeBytes(of: value.littleEndian) { Data($0) }
  }

  private static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
  }

  private static func readUInt64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
    (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * $1) }
  }
}

/// The shell's view of the journal: whether one is bound to the last whole save, and how big it has grown.
struct JournalProgress {
  /// Whether appends follow the last whole save (false before the first, and after any failed save).
  var isBound = false
  /// The bytes appended since the last whole save.
  var bytes = 0
  /// The size of the last whole save.
  var wholeBytes = 0

  /// Whether the next save should be whole: once the journal outgrows the record (and 64 KiB), replaying it
  /// would cost more than reading a new record, so the cost of whole saves stays a fixed share of the
  /// bytes appended.
  var isDueForCompaction: Bool { bytes >= max(wholeBytes, 64 << 10) }
}
