import EventProtocol
import Foundation
import TestScheduling
import Testing
import UpdateMachineTesting
import VideoMessaging

@Suite("Blob stores: resumable, atomic, failing on demand")
struct BlobStoreTests {
  @Test("the file store resumes a partial blob after the process is gone, and completes it atomically")
  func fileStoreResumes() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let key = BlobKey(rawValue: "videos/a b/c")
    let bytes = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0) })
    for (index, cut) in [0, 1, 300, 999].enumerated() {
      let perVideo = BlobKey(rawValue: "\(key.rawValue)-\(index)")
      try await FileBlobStore(directory: directory).append(bytes.prefix(cut), to: perVideo, at: 0)
      // A kill here: nothing of the first store survives but its files.
      let resumed = FileBlobStore(directory: directory)
      await #expect(throws: BlobStoreError.self) { _ = try await resumed.size(of: perVideo) }
      let offset = try await resumed.partialLength(perVideo)
      #expect(offset == cut)
      try await resumed.append(bytes.suffix(from: offset), to: perVideo, at: offset)
      try await resumed.complete(perVideo, at: t0)
      #expect(try await resumed.read(perVideo, offset: 0, length: 2_000) == bytes)
      #expect(try await resumed.partialLength(perVideo) == 0)
    }
    #expect(try await FileBlobStore(directory: directory).list().count == 4)
  }

  @Test("an append not at the partial blob's end is refused; a missing blob is gone")
  func misuse() async throws {
    for store in [
      InMemoryBlobStore() as any BlobStore,
      FileBlobStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID())")),
    ] {
      try await store.append(Data([1, 2]), to: "k", at: 0)
      await #expect(throws: BlobStoreError.offsetMismatch(expected: 2, got: 5)) {
        try await store.append(Data([3]), to: "k", at: 5)
      }
      do {
        _ = try await store.read("missing", offset: 0, length: 1)
        Issue.record("a missing blob was read")
      } catch {
        #expect(error.isGone)
      }
      try await store.delete("k")
      #expect(try await store.partialLength("k") == 0)
    }
  }

  @Test("the in-memory store fails and truncates on demand")
  func inMemoryFaults() async throws {
    let store = InMemoryBlobStore()
    store.put(Data(repeating: 7, count: 100), at: "k", createdAt: t0)
    store.failNext(1)
    do {
      _ = try await store.size(of: "k")
      Issue.record("no injected failure")
    } catch {
      #expect(!error.isGone)
    }
    store.truncateNextRead(to: 10)
    #expect(try await store.read("k", offset: 0, length: 100).count == 10)
    #expect(try await store.read("k", offset: 90, length: 100).count == 10)
  }
}

@Suite("Blob stores: a slow store", .hangGuard)
struct SlowBlobStoreTests {
  @Test("a slow in-memory store answers only once its latency has passed on the clock")
  func slowStore() async throws {
    let clock = ManualClock()
    let store = InMemoryBlobStore(latency: .seconds(2), clock: clock)
    let reading = Task { try await store.partialLength("k") }
    await clock.waitForSleepers(count: 1)
    clock.advance(by: .seconds(2))
    #expect(try await reading.value == 0)
  }
}
