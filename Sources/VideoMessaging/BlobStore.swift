import EventProtocol
import Foundation

/// Where video files are kept: the service's blob storage, or a device's own files.
///
/// A blob is written as a *partial* blob, appended to at its current length (so an interrupted transfer
/// resumes from where it stopped), then completed in one atomic step: it appears whole or not at all.
/// Reads are ranged, so a download resumes from a byte offset too.
///
/// ```swift
/// let offset = try await store.partialLength(key)
/// try await store.append(chunk, to: key, at: offset)
/// try await store.complete(key, at: now)
/// ```
public protocol BlobStore: Sendable {
  /// The length of the partial blob being written under `key`; 0 when there is none.
  func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int
  /// Appends `bytes` to the partial blob under `key`, which must be exactly `offset` bytes long.
  func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError)
  /// Makes the partial blob under `key` complete, atomically, dated `time`.
  func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError)
  /// The size of the complete blob under `key`.
  /// - Throws: ``BlobStoreError/gone(_:)`` when there is none.
  func size(of key: BlobKey) async throws(BlobStoreError) -> Int
  /// Up to `length` bytes of the complete blob under `key`, from `offset`.
  /// - Throws: ``BlobStoreError/gone(_:)`` when there is none.
  func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data
  /// Deletes the blob under `key`, complete or partial; nothing happens when there is none.
  func delete(_ key: BlobKey) async throws(BlobStoreError)
  /// Every complete blob.
  func list() async throws(BlobStoreError) -> [BlobInfo]
}

/// Why a blob operation failed: the blob is gone for good, or the store failed this time.
public struct BlobStoreError: Error, Hashable, Sendable, CustomStringConvertible {
  private enum Code: Hashable {
    case gone
    case unavailable
    case offsetMismatch
  }

  private let code: Code
  /// What happened.
  public let detail: String

  private init(_ code: Code, _ detail: String) {
    self.code = code
    self.detail = detail
  }

  /// There is no such blob (never written, or deleted): retrying will not help.
  public static func gone(_ key: BlobKey) -> BlobStoreError { .init(.gone, "blob \(key) is gone") }
  /// The store failed this time (network, disk); retrying may help.
  public static func unavailable(_ detail: String) -> BlobStoreError { .init(.unavailable, detail) }
  /// An append did not start at the partial blob's length.
  public static func offsetMismatch(expected: Int, got: Int) -> BlobStoreError {
    .init(.offsetMismatch, "append at \(got), but the partial blob is \(expected) bytes long")
  }

  /// Whether the blob is gone for good.
  public var isGone: Bool { code == .gone }
  /// Whether an append did not start at the partial blob's length.
  public var isOffsetMismatch: Bool { code == .offsetMismatch }

  public var description: String { detail }
}
