import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachineTesting
import VideoMessaging

/// The blob store in the database's tables, on SQLite and (when a server is given) PostgreSQL: the same
/// promises as the file store (resumable, atomic, ranged), kept across a restart of the process, and two
/// appends racing at one offset never both landing.
@Suite("DatabaseBlobStore: blobs in the database, resumable and atomic", .serialized, .hangGuard)
struct DatabaseBlobStoreTests {
  private let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
  private static let bytes = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

  @Test(
    "a partial blob resumes after the process is gone, completes atomically, and reads back whole",
    arguments: StoredBackend.available
  )
  func resumesAfterRestart(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    for (index, cut) in [0, 1, 300, 999].enumerated() {
      let key = BlobKey(rawValue: "videos/a b/c-\(index)")
      try await withStore(database) { store in try await store.append(Self.bytes.prefix(cut), to: key, at: 0) }
      // A kill here: nothing of the first process survives but the database.
      try await withStore(database) { store in
        await #expect(throws: BlobStoreError.gone(key)) { _ = try await store.size(of: key) }
        let offset = try await store.partialLength(key)
        #expect(offset == cut)
        try await store.append(Self.bytes.suffix(from: offset), to: key, at: offset)
        try await store.complete(key, at: t0)
        #expect(try await store.read(key, offset: 0, length: 2_000) == Self.bytes)
        #expect(try await store.size(of: key) == Self.bytes.count)
        #expect(try await store.partialLength(key) == 0)
      }
    }
    try await withStore(database) { store in
      let listed = try await store.list()
      #expect(listed.map(\.key.rawValue) == (0..<4).map { "videos/a b/c-\($0)" })
      #expect(listed.allSatisfy { $0.size == Self.bytes.count && $0.createdAt == t0 })
    }
  }

  @Test(
    "an append not at the partial blob's end changes nothing; a missing blob is gone; delete removes both",
    arguments: StoredBackend.available
  )
  func misuse(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    try await withStore(database) { store in
      await #expect(throws: BlobStoreError.offsetMismatch(expected: 0, got: 5)) {
        try await store.append(Data([3]), to: "k", at: 5)
      }
      #expect(try await store.partialLength("k") == 0)
      await #expect(throws: BlobStoreError.gone("k")) { try await store.complete("k", at: t0) }
      try await store.append(Data([1, 2]), to: "k", at: 0)
      await #expect(throws: BlobStoreError.offsetMismatch(expected: 2, got: 5)) {
        try await store.append(Data([3]), to: "k", at: 5)
      }
      await #expect(throws: BlobStoreError.gone("missing")) {
        _ = try await store.read("missing", offset: 0, length: 1)
      }
      try await store.complete("k", at: t0)
      // A retried completion whose answer was lost: done already, not gone.
      try await store.complete("k", at: t0)
      // A new upload under the same key, beside the complete blob, replaces it when it completes.
      try await store.append(Data([9, 9, 9]), to: "k", at: 0)
      #expect(try await store.read("k", offset: 0, length: 10) == Data([1, 2]))
      try await store.complete("k", at: t0)
      #expect(try await store.read("k", offset: 0, length: 10) == Data([9, 9, 9]))
      try await store.append(Data([4]), to: "k", at: 0)
      try await store.delete("k")
      #expect(try await store.partialLength("k") == 0)
      await #expect(throws: BlobStoreError.gone("k")) { _ = try await store.size(of: "k") }
      #expect(try await store.list().isEmpty)
    }
  }

  @Test("random appends and ranged reads agree with the bytes written", arguments: StoredBackend.available)
  func rangedReadsAgree(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    try await withStore(database) { store in
      for seed in UInt64(1)...(backend == .sqlite ? 12 : 4) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let key = BlobKey(rawValue: "seed-\(seed)")
        var written = Data()
        for _ in 0..<Int.random(in: 1...12, using: &random) {
          let chunk = Data(
            (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
          )
          try await store.append(chunk, to: key, at: written.count)
          written.append(chunk)
        }
        try await store.complete(key, at: t0)
        #expect(try await store.size(of: key) == written.count, "seed \(seed)")
        for _ in 0..<20 {
          let offset = Int.random(in: -2...(written.count + 2), using: &random)
          let length = Int.random(in: -1...(written.count + 4), using: &random)
          let start = min(max(offset, 0), written.count)
          let end = min(start + max(length, 0), written.count)
          let read = try await store.read(key, offset: offset, length: length)
          #expect(read == written.subdata(in: start..<end), "seed \(seed): read(\(offset), \(length))")
        }
      }
    }
  }

  @Test(
    "appends racing at one offset: exactly one lands, the others learn the new length",
    .enabled(if: testPostgresURL != nil, "set EVENT_SERVER_TEST_POSTGRES_URL (Server/scripts/postgres-tests.sh does)")
  )
  func racingAppends() async throws {
    let database = try await StoredBackend.postgres.scratch()
    try await withStore(database) { store in
      for round in 0..<5 {
        let key = BlobKey(rawValue: "race-\(round)")
        // Round 0 races to start the blob; the others race at the end of a partial blob that exists.
        let offset = round == 0 ? 0 : 50
        if offset > 0 { try await store.append(Data(repeating: 255, count: offset), to: key, at: 0) }
        let outcomes = await withTaskGroup(of: (Int, Result<Void, BlobStoreError>).self) { group in
          for writer in 0..<8 {
            group.addTask {
              do throws(BlobStoreError) {
                try await store.append(Data(repeating: UInt8(writer), count: 100), to: key, at: offset)
                return (writer, .success(()))
              } catch {
                return (writer, .failure(error))
              }
            }
          }
          var outcomes: [(Int, Result<Void, BlobStoreError>)] = []
          for await outcome in group { outcomes.append(outcome) }
          return outcomes
        }
        let winners = outcomes.filter { if case .success = $0.1 { true } else { false } }.map(\.0)
        #expect(winners.count == 1, "round \(round): \(outcomes)")
        for case (_, .failure(let error)) in outcomes {
          #expect(error == .offsetMismatch(expected: offset + 100, got: offset), "round \(round)")
        }
        try await store.complete(key, at: t0)
        let expected = Data(repeating: 255, count: offset) + Data(repeating: UInt8(winners.first ?? 0), count: 100)
        #expect(try await store.read(key, offset: 0, length: 1_000) == expected, "round \(round)")
      }
    }
  }

  /// Runs `body` with a store on `database`, opened and migrated for it, then closed: a new process each call.
  private func withStore(
    _ database: StoredDatabase,
    _ body: (DatabaseBlobStore) async throws -> Void
  ) async throws {
    let log = try await database.open()
    do {
      _ = try await log.migrate(StoredVideoServer.schema)
      try await body(DatabaseBlobStore(log: log))
      await database.close(log)
    } catch {
      await database.close(log)
      throw error
    }
  }
}
