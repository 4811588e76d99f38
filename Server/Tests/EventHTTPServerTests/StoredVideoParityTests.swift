import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import VideoMessaging

/// The stored video service against the in-memory one, its model: for every seed, a random history of
/// commands from three users (uploads begun, completed, abandoned and claimed; downloads, views, deletions;
/// retention deadlines; the janitor taking the blobs to delete), with small bounds so that refusals, trimmed
/// histories and forgotten keys all happen. After every step the two must agree on everything a client or
/// the blob routes can see: the events or the refusal, every user's snapshot, pages of every narrow, every
/// key's binding and readers, every user's bytes and uploads, the next deadline and the blobs to delete.
@Suite("StoredVideoServer equals VideoServer on random histories", .serialized, .hangGuard)
struct StoredVideoParityTests {
  static let users: [UserID] = ["ann", "ben", "cy"]
  static var limits: VideoServerLimits {
    var limits = VideoServerLimits()
    limits.maximumVideoBytes = 600
    limits.maximumBytesPerUser = 1_500
    limits.maximumVideosPerSender = 5
    limits.maximumCaptionBytes = 40
    limits.maximumVideosInFlightPerSender = 3
    limits.maximumUploadsPerUser = 3
    limits.maximumReleasedKeysPerUser = 4
    return limits
  }

  static var retention: VideoRetention {
    var retention = VideoRetention(
      waitingForDownload: .seconds(60),
      afterDownloaded: .seconds(30),
      afterViewed: .seconds(20)
    )
    retention.historyPerConversation = 2
    return retention
  }

  enum Step: Sendable, CustomStringConvertible {
    case command(VideoCommand, from: UserID)
    case deadline
    case takeDeletions

    var description: String {
      switch self {
      case .command(let command, let user): "\(user): \(command)"
      case .deadline: "deadline"
      case .takeDeletions: "take deletions"
      }
    }
  }

  /// Draws the next step: mostly fresh video ids and keys, sometimes recent ones (repeats, reuse), and
  /// downloads, views and deletions mostly from the user allowed to send them (read from the model, which
  /// both servers then receive alike).
  static func step(using random: inout SeededRandomNumberGenerator, ids: inout Names, model: VideoServer) -> Step {
    let user = users.randomElement(using: &random)!
    let size = Int.random(in: 0..<10, using: &random) == 0 ? 700 : Int.random(in: 0...300, using: &random)
    func video() -> VideoID { VideoID(rawValue: ids.pick("v", fresh: 20, using: &random)) }
    func key(fresh: Int) -> BlobKey { BlobKey(rawValue: ids.pick("videos/k", fresh: fresh, using: &random)) }
    func actor(of id: VideoID, _ role: KeyPath<VideoServer.TrackedVideo, UserID>) -> UserID {
      guard Int.random(in: 0..<10, using: &random) < 7, let tracked = model.videos[id] else { return user }
      return tracked[keyPath: role]
    }
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<9: return .command(.uploadStarted(key(fresh: 70)), from: user)
    case 9..<14:
      // Captions: set, changed, removed, repeated, too long, mostly by the sender of a video in a history.
      let id = video()
      let caption = ["", "a caption", "another one", String(repeating: "c", count: 41)].randomElement(using: &random)!
      let sender = Int.random(in: 0..<10, using: &random) < 8 ? model.history[id]?.sender ?? user : user
      return .command(.captioned(id, caption: caption), from: sender)
    case 14..<24: return .command(.uploadCompleted(key(fresh: 0), size: size), from: user)
    case 24..<27: return .command(.uploadAbandoned(key(fresh: 0)), from: user)
    case 27..<55:
      // Mostly to one friend, so that conversations fill up and their histories are trimmed.
      let friend: UserID = user == "ann" ? "ben" : "ann"
      let recipient = Int.random(in: 0..<10, using: &random) < 7 ? friend : users.randomElement(using: &random)!
      let caption = Int.random(in: 0..<4, using: &random) == 0 ? "sent by \(user)" : nil
      let upload = VideoUpload(
        video: video(),
        recipient: recipient,
        blobKey: key(fresh: 50),
        size: size,
        caption: caption
      )
      return .command(.uploaded(upload), from: user)
    case 55..<68:
      let id = video()
      return .command(.downloaded(id), from: actor(of: id, \.recipient))
    case 68..<78:
      let id = video()
      return .command(.viewed(id), from: actor(of: id, \.recipient))
    case 78..<84:
      let id = video()
      return .command(.deleted(id), from: actor(of: id, \.sender))
    case 84..<86: return .command(.viewed(VideoID(rawValue: String(repeating: "x", count: 65))), from: user)
    case 86..<96: return .deadline
    default: return .takeDeletions
    }
  }

  /// The ids and keys drawn so far, fresh ones numbered in order.
  struct Names {
    var drawn: [String: [String]] = [:]

    /// A fresh name under `prefix` `fresh` percent of the time (or when none was drawn), else a recent one.
    mutating func pick(_ prefix: String, fresh: Int, using random: inout SeededRandomNumberGenerator) -> String {
      let earlier = drawn[prefix, default: []]
      if earlier.isEmpty || Int.random(in: 0..<100, using: &random) < fresh {
        let name = "\(prefix)\(earlier.count + 1)"
        drawn[prefix, default: []].append(name)
        return name
      }
      return earlier.suffix(8).randomElement(using: &random)!
    }

    var keys: [BlobKey] { drawn["videos/k", default: []].map(BlobKey.init(rawValue:)) }
  }

  static let cases: [(StoredBackend, UInt64)] =
    Array(1...12).map { (StoredBackend.sqlite, UInt64($0)) }
    + (testPostgresURL == nil ? [] : Array(1...2).map { (StoredBackend.postgres, UInt64($0)) })

  @Test("every step agrees", arguments: cases)
  func everyStepAgrees(_ backend: StoredBackend, _ seed: UInt64) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    defer { Task { await database.close(log) } }
    let stored = StoredVideoServer(limits: Self.limits, retention: Self.retention)
    _ = try await log.migrate(stored.migrations)
    var memory = VideoServer(limits: Self.limits, retention: Self.retention)
    var random = SeededRandomNumberGenerator(seed: seed)
    var now = Timestamp(secondsSinceEpoch: 1_000_000)
    var trace: [String] = []
    var names = Names()
    var refusals = 0
    var delivered = 0
    for index in 0..<200 {
      now = now.advanced(by: .milliseconds(Int64.random(in: 0...3_000, using: &random)))
      let step = Self.step(using: &random, ids: &names, model: memory)
      trace.append("\(index) at \(now): \(step)")
      let expected: Outcome
      let actual: Outcome
      switch step {
      case .command(let command, let user):
        do {
          expected = .delivered(try memory.handle(command, from: user, at: now))
        } catch {
          expected = .refused(error.reason)
        }
        actual = await Outcome.of {
          try await log.transaction { [now] in try await stored.handle(command, from: user, at: now, in: $0) }
        }
      case .deadline:
        now = now.advanced(by: .seconds(Int64.random(in: 0...40, using: &random)))
        expected = .delivered(memory.deadlineReached(at: now))
        actual = await Outcome.of {
          try await log.transaction { [now] in try await stored.deadlineReached(at: now, in: $0) }
        }
      case .takeDeletions:
        expected = .deleted(Array(Set(memory.takeBlobDeletions())).sorted())
        actual = .deleted(try await log.transaction { try await stored.takeBlobDeletions(in: $0) })
      }
      if case .refused = expected { refusals += 1 }
      if case .delivered(let deliveries) = expected, !deliveries.isEmpty { delivered += 1 }
      #expect(actual == expected, "seed \(seed), step \(index)\n\(trace.joined(separator: "\n"))")
      let seen = try await log.transaction { [names] in try await Self.observe(stored, keys: names.keys, in: $0) }
      let model = Self.observe(memory, keys: names.keys)
      #expect(seen == model, "seed \(seed), after step \(index)\n\(trace.joined(separator: "\n"))")
      if actual != expected || seen != model { return }
    }
    // The histories reach the cases the bounds are for.
    #expect(refusals > 10)
    #expect(refusals > 10 && delivered > 10, "\(refusals) refusals, \(delivered) steps with events")
  }

  /// The histories of these seeds reach every rule the bounds are for (checked on the model alone, so a
  /// change to the generator that stops reaching one is noticed): trimmed histories, expired and retired
  /// videos, and released keys forgotten past the bound.
  @Test("the seeds reach every rule")
  func seedsReachEveryRule() {
    var reached: [String: Int] = [:]
    for (backend, seed) in Self.cases where backend == .sqlite {
      var memory = VideoServer(limits: Self.limits, retention: Self.retention)
      var random = SeededRandomNumberGenerator(seed: seed)
      var names = Names()
      var now = Timestamp(secondsSinceEpoch: 1_000_000)
      var bound: Set<BlobKey> = []
      for _ in 0..<200 {
        now = now.advanced(by: .milliseconds(Int64.random(in: 0...3_000, using: &random)))
        var deliveries: [Delivery<VideoEvent>] = []
        switch Self.step(using: &random, ids: &names, model: memory) {
        case .command(let command, let user):
          deliveries = (try? memory.handle(command, from: user, at: now)) ?? []
        case .deadline:
          now = now.advanced(by: .seconds(Int64.random(in: 0...40, using: &random)))
          deliveries = memory.deadlineReached(at: now)
        case .takeDeletions:
          _ = memory.takeBlobDeletions()
        }
        for delivery in deliveries {
          switch delivery.event {
          case .historyTrimmed: reached["trimmed", default: 0] += 1
          case .captioned: reached["captioned", default: 0] += 1
          case .untracked(let gone) where gone.reason == .expired: reached["expired", default: 0] += 1
          case .untracked(let gone) where gone.reason == .retired: reached["retired", default: 0] += 1
          default: break
          }
        }
        bound.formUnion(memory.blobBindings.keys)
      }
      // Keys once bound that the model no longer knows: released keys forgotten past the bound.
      reached["forgotten", default: 0] += bound.subtracting(memory.blobBindings.keys).count
    }
    for rule in ["trimmed", "expired", "retired", "forgotten", "captioned"] {
      #expect(reached[rule, default: 0] > 2, "\(rule): \(reached)")
    }
  }

  /// What a step returned: its events, its refusal, or the blobs handed out for deletion.
  enum Outcome: Equatable, Sendable {
    case delivered([Delivery<VideoEvent>])
    case refused(String)
    case deleted([BlobKey])

    static func of(_ body: () async throws -> [Delivery<VideoEvent>]) async -> Outcome {
      do {
        return .delivered(try await body())
      } catch let rejection as CommandRejection {
        return .refused(rejection.reason)
      } catch {
        return .refused("unexpected: \(error)")
      }
    }
  }

  /// Everything a client or the blob routes can see of a video server.
  struct Observation: Equatable, Sendable {
    var snapshots: [VideoSnapshot] = []
    var pages: [String] = []
    var bindings: [BlobBinding?] = []
    var readers: [Bool] = []
    var bytes: [Int] = []
    var uploads: [Set<BlobKey>] = []
    var nextDeadline: Timestamp?
  }

  /// The requests each observation reads: every narrow of every user, around the oldest, the newest and a
  /// position in the middle.
  static func requests(for user: UserID) -> [FetchRequest] {
    let narrows = [Narrow([])] + users.map { VideoHistory.conversation(between: user, and: $0) }
    return narrows.flatMap { narrow in
      [
        FetchRequest(narrow: narrow, anchor: .oldest, before: 0, after: 2),
        FetchRequest(narrow: narrow, anchor: .newest, before: 2, after: 0),
        FetchRequest(narrow: narrow, anchor: .position(4), before: 1, after: 1),
      ]
    }
  }

  static func describe(_ page: Result<FetchPage<VideoHistoryItem>, CommandRejection>) -> String {
    switch page {
    case .success(let page): "\(page.items) oldest \(page.foundOldest) newest \(page.foundNewest)"
    case .failure(let rejection): "refused: \(rejection.reason)"
    }
  }

  static func observe(_ server: VideoServer, keys: [BlobKey]) -> Observation {
    var seen = Observation()
    for user in users {
      seen.snapshots.append(server.snapshot(for: user))
      for request in requests(for: user) {
        seen.pages.append(describe(Result { () throws(CommandRejection) in try server.fetch(request, for: user) }))
      }
      seen.bytes.append(server.storedBytes(of: user))
      seen.uploads.append(server.uploads(of: user))
    }
    for key in keys {
      seen.bindings.append(server.blobBindings[key])
      for user in users { seen.readers.append(server.mayRead(key, user: user)) }
    }
    // The model's own heap keeps stale entries: its next deadline is the earliest of the videos' own.
    seen.nextDeadline = server.videos.values.compactMap { video in
      video.changedAt.map { server.retention.deadline(for: video.status, since: $0) }
    }.min()
    return seen
  }

  static func observe(
    _ server: StoredVideoServer,
    keys: [BlobKey],
    in transaction: any DatabaseTransaction
  ) async throws -> Observation {
    var seen = Observation()
    for user in users {
      seen.snapshots.append(try await server.snapshot(for: user, in: transaction))
      for request in requests(for: user) {
        let page: Result<FetchPage<VideoHistoryItem>, CommandRejection>
        do {
          page = .success(try await server.fetch(request, for: user, in: transaction))
        } catch let rejection as CommandRejection {
          page = .failure(rejection)
        }
        seen.pages.append(describe(page))
      }
      seen.bytes.append(try await server.storedBytes(of: user, in: transaction))
      seen.uploads.append(try await server.uploads(of: user, in: transaction))
    }
    for key in keys {
      seen.bindings.append(try await server.binding(of: key, in: transaction))
      for user in users { seen.readers.append(try await server.mayRead(key, user: user, in: transaction)) }
    }
    seen.nextDeadline = try await server.nextDeadline(in: transaction)
    return seen
  }
}
