import Foundation

/// FNV-1a, 64 bits: the checksum of persisted frames (the client's journal, the server's input log) and the
/// digest of mutations. Tells a torn, damaged or different byte string from the expected one; it is no
/// defence against tampering.
///
/// ```swift
/// let checksum = FNV1a.hash(Array("hello".utf8))
/// ```
public enum FNV1a {
  /// The 64-bit FNV-1a hash of `bytes`.
  public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return hash
  }

  /// The 64-bit FNV-1a hash of `data`, read through its contiguous bytes (iterating `Data` byte by byte
  /// costs several times more).
  public static func hash(_ data: Data) -> UInt64 {
    data.withUnsafeBytes { hash($0) }
  }
}
