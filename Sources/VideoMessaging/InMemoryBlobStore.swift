import EventProtocol
import Foundation
import Synchronization

/// A blob store in memory, for tests, previews and the simulation, that can be told to fail: fail the next
/// operations, cut the next read short, or lose blobs.
///
/// ```swift
/// let store = InMemoryBlobStore()
/// store.failNext(2)            // the next two operations throw `unavailable`
/// store.truncateNextRead(to: 10)
/// ```
public final class InMemoryBlobStore: BlobStore {
  private struct Contents {
    var blobs: [BlobKey: (data: Data, createdAt: Timestamp)] = [:]
    var partials: [BlobKey: Data] = [:]
    var failuresLeft = 0
    var operationsBeforeFailing = 0
    var truncateNextReadTo: Int?
    var operations = 0
    var bytesRead = 0
  }

  private let contents = Mutex(Contents())
  private let slowness: (@Sendable () async -> Void)?

  /// An empty store that answers at once.
  public init() {
    slowness = nil
  }

  /// An empty store whose every operation first waits `latency` on `clock` (a `ManualClock` in tests).
  public init<C: Clock>(latency: Duration, clock: C) where C.Duration == Duration {
    slowness = { try? await clock.sleep(for: latency) }
  }

  /// Makes `count` operations throw ``BlobStoreError/unavailable(_:)``, after `skipping` more succeed.
  public func failNext(_ count: Int, after skipping: Int = 0) {
    contents.withLock {
      $0.failuresLeft += count
      $0.operationsBeforeFailing = skipping
    }
  }

  /// How many bytes reads have returned.
  public var bytesRead: Int { contents.withLock { $0.bytesRead } }

  /// Makes the next read return at most `length` bytes (a connection that dropped mid-transfer).
  public func truncateNextRead(to length: Int) {
    contents.withLock { $0.truncateNextReadTo = length }
  }

  /// Puts a complete blob directly (a file already uploaded).
  public func put(_ data: Data, at key: BlobKey, createdAt: Timestamp) {
    contents.withLock { $0.blobs[key] = (data, createdAt) }
  }

  /// The complete blob under `key`, if any.
  public func data(at key: BlobKey) -> Data? { contents.withLock { $0.blobs[key]?.data } }

  /// The keys of every complete blob.
  public var keys: [BlobKey] { contents.withLock { $0.blobs.keys.sorted() } }

  /// How many operations were attempted.
  public var operationCount: Int { contents.withLock { $0.operations } }

  private func attempt<Value>(_ body: (inout Contents) throws(BlobStoreError) -> Value) throws(BlobStoreError) -> Value
  {
    try contents.withLock { (contents: inout Contents) throws(BlobStoreError) -> Value in
      contents.operations += 1
      if contents.operationsBeforeFailing > 0 {
        contents.operationsBeforeFailing -= 1
      } else if contents.failuresLeft > 0 {
        contents.failuresLeft -= 1
        throw .unavailable("injected failure")
      }
      return try body(&contents)
    }
  }

  public func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int {
    await slowness?()
    return try attempt { $0.partials[key]?.count ?? 0 }
  }

  public func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError) {
    await slowness?()
    return try attempt { (contents: inout Contents) throws(BlobStoreError) in
      let length = contents.partials[key]?.count ?? 0
      guard length == offset else { throw .offsetMismatch(expected: length, got: offset) }
      contents.partials[key, default: Data()].append(bytes)
    }
  }

  public func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError) {
    await slowness?()
    return try attempt { (contents: inout Contents) throws(BlobStoreError) in
      guard let partial = contents.partials.removeValue(forKey: key) else {
        if contents.blobs[key] != nil { return }
        throw .gone(key)
      }
      contents.blobs[key] = (partial, time)
    }
  }

  public func size(of key: BlobKey) async throws(BlobStoreError) -> Int {
    await slowness?()
    return try attempt { (contents: inout Contents) throws(BlobStoreError) -> Int in
      guard let blob = contents.blobs[key] else { throw .gone(key) }
      return blob.data.count
    }
  }

  public func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data {
    await slowness?()
    return try attempt { (contents: inout Contents) throws(BlobStoreError) -> Data in
      guard let blob = contents.blobs[key] else { throw .gone(key) }
      var length = length
      if let cut = contents.truncateNextReadTo {
        length = min(length, cut)
        contents.truncateNextReadTo = nil
      }
      let start = min(max(offset, 0), blob.data.count)
      let end = min(start + max(length, 0), blob.data.count)
      contents.bytesRead += end - start
      return blob.data.subdata(in: start..<end)
    }
  }

  public func delete(_ key: BlobKey) async throws(BlobStoreError) {
    await slowness?()
    return try attempt { contents in
      contents.blobs[key] = nil
      contents.partials[key] = nil
    }
  }

  public func list() async throws(BlobStoreError) -> [BlobInfo] {
    await slowness?()
    return try attempt { contents in
      contents.blobs.map { BlobInfo(key: $0.key, size: $0.value.data.count, createdAt: $0.value.createdAt) }
        .sorted { $0.key < $1.key }
    }
  }
}
