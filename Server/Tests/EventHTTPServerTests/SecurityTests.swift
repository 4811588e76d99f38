import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import VideoMessaging

/// One named test per promise of `docs/security.md`, each against a live server on 127.0.0.1, each sending
/// what an attacker holding a valid key of their own (or no key) would send.
@Suite("Security: no user reaches or harms another", .serialized, .hangGuard)
struct SecurityTests {
  private static let secret = Data("alice's secret video".utf8)

  @Test(
    "1. a blob key is not a capability: naming Alice's key in Bob's video is refused, Carol cannot read it",
    arguments: VideoServerKind.allCases
  )
  func blobKeyIsNotACapability(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind)
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let key = "videos/alice-secret"
    #expect(try await http.upload(Self.secret, key: key, as: "alice").map(\.status) == [200, 200])
    let stolen = VideoCommandJSON.uploaded(video: "bob-1", recipient: "carol", key: key, size: Self.secret.count)
    let claim = try await http.mutation(stolen, as: "bob", id: 1)
    #expect(claim.status == 400)
    for user: UserID in ["bob", "carol"] {
      #expect(try await http.download(key, as: user).status == 404)
    }
    let own = VideoCommandJSON.uploaded(video: "alice-1", recipient: "dave", key: key, size: Self.secret.count)
    #expect(try await http.mutation(own, as: "alice", id: 1).status == 200)
    #expect(try await http.download(key, as: "alice").body == Self.secret)
    for user: UserID in ["bob", "carol"] {
      #expect(try await http.download(key, as: user).status == 404)
    }
    try await live.stop()
  }

  @Test(
    "2. deleting a video revokes reading at once; the key is never claimable again; the janitor removes the file",
    arguments: VideoServerKind.allCases
  )
  func deletionRevokes(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind, janitor: (interval: .milliseconds(200), grace: .seconds(3600)))
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let key = "videos/alice-2"
    _ = try await http.upload(Self.secret, key: key, as: "alice")
    let video = VideoCommandJSON.uploaded(video: "alice-2", recipient: "bob", key: key, size: Self.secret.count)
    #expect(try await http.mutation(video, as: "alice", id: 1).status == 200)
    #expect(try await http.download(key, as: "bob").body == Self.secret)
    #expect(try await http.mutation(.deleted("alice-2"), as: "alice", id: 2).status == 200)
    for user: UserID in ["alice", "bob"] {
      #expect(try await http.download(key, as: user).status == 404)
    }
    let reclaim = VideoCommandJSON.uploaded(video: "carol-1", recipient: "bob", key: key, size: Self.secret.count)
    #expect(try await http.mutation(reclaim, as: "carol", id: 1).status == 400)
    #expect(try await http.mutation(reclaim, as: "alice", id: 3).status == 400)
    let write = try await http.send(
      "PUT",
      "api/v1/uploads",
      query: ["key": key, "offset": "0"],
      as: "carol",
      body: Data([1])
    )
    #expect(write.status == 404)
    let file = live.dataDirectory.appendingPathComponent("blobs/videos%2Falice-2")
    var removed = false
    for _ in 0..<100 where !removed {
      removed = !FileManager.default.fileExists(atPath: file.path)
      if !removed { try await Task.sleep(for: .milliseconds(100)) }
    }
    #expect(removed, "the janitor, on the server's schedule, deletes the released blob")
    try await live.stop()
  }

  @Test(
    "3. K.partial does not reach K's upload in progress: another user can neither read nor extend it",
    arguments: VideoServerKind.allCases
  )
  func partialNamespace(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind)
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let key = "videos/alice-3"
    let put = try await http.send(
      "PUT",
      "api/v1/uploads",
      query: ["key": key, "offset": "0"],
      as: "alice",
      body: Self.secret
    )
    #expect(put.status == 200)
    let peek = try await http.send("GET", "api/v1/uploads", query: ["key": key + ".partial"], as: "bob")
    #expect(peek.status == 200 && peek.text.contains(#""length":0"#))
    let offset = String(Self.secret.count)
    let extend = try await http.send(
      "PUT",
      "api/v1/uploads",
      query: ["key": key + ".partial", "offset": offset],
      as: "bob",
      body: Data("evil".utf8)
    )
    #expect(extend.status == 409)
    #expect(try await http.download(key + ".partial", as: "bob").status == 404)
    #expect(try await http.send("POST", "api/v1/uploads/complete", query: ["key": key], as: "alice").status == 200)
    let own = VideoCommandJSON.uploaded(video: "alice-3", recipient: "bob", key: key, size: Self.secret.count)
    #expect(try await http.mutation(own, as: "alice", id: 1).status == 200)
    #expect(try await http.download(key, as: "bob").body == Self.secret)
    try await live.stop()
  }

  @Test(
    "4. upload ownership survives a restart: afterwards another user still cannot extend or complete it",
    arguments: VideoServerKind.allCases
  )
  func ownershipDurable(kind: VideoServerKind) async throws {
    let first = try await LiveServer.start(kind)
    defer { first.removeData() }
    let key = "videos/alice-4"
    var http = RawHTTP(base: first.url)
    _ = try await http.send(
      "PUT",
      "api/v1/uploads",
      query: ["key": key, "offset": "0"],
      as: "alice",
      body: Self.secret
    )
    try await first.stop()
    let second = try await LiveServer.start(kind, dataDirectory: first.dataDirectory)
    http = RawHTTP(base: second.url)
    let offset = String(Self.secret.count)
    let append = try await http.send(
      "PUT",
      "api/v1/uploads",
      query: ["key": key, "offset": offset],
      as: "bob",
      body: Data([1])
    )
    #expect(append.status == 404)
    #expect(try await http.send("POST", "api/v1/uploads/complete", query: ["key": key], as: "bob").status == 404)
    #expect(try await http.send("GET", "api/v1/uploads", query: ["key": key], as: "alice").text.contains(offset))
    try await second.stop()
  }

  @Test(
    "5. no command of Bob's drops Alice's queue: an oversize one is refused to Bob, and Alice's poll is still served",
    arguments: VideoServerKind.allCases
  )
  func oversizeCommandRefusedToSender(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind)
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let register = try await http.send(
      "POST",
      "api/v1/register",
      as: "alice",
      body: Data("client_id=a1".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    let queueID = try #require(
      (try JSONSerialization.jsonObject(with: register.body) as? [String: Any])?["queue_id"] as? String
    )
    for size in [100_000, 300_000, 2_000_000] {
      let huge = VideoCommandJSON.uploaded(
        video: String(repeating: "v", count: size),
        recipient: "alice",
        key: "videos/b",
        size: 1
      )
      let answer = try await http.mutation(huge, as: "bob", id: 1)
      #expect([400, 413].contains(answer.status), "a \(size)-byte id is refused to its sender")
    }
    let poll = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queueID, "last_event_id": "-1", "dont_block": "true"],
      as: "alice"
    )
    #expect(poll.status == 200)
    #expect(try await live.trackedVideoCount() == 0)
    try await live.stop()
  }

  @Test(
    "6. growth per user is bounded: long ids, too many videos, push tokens and clients are refused, nothing stored grows",
    arguments: VideoServerKind.allCases
  )
  func growthBounded(kind: VideoServerKind) async throws {
    var limits = VideoServerLimits()
    limits.maximumVideosInFlightPerSender = 3
    let live = try await LiveServer.start(kind, limits: limits)
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    for index in 1...3 {
      let video = VideoCommandJSON.uploaded(video: "v\(index)", recipient: "alice", key: "videos/v\(index)", size: 1)
      #expect(try await http.mutation(video, as: "bob", id: UInt64(index)).status == 200)
    }
    let fourth = VideoCommandJSON.uploaded(video: "v4", recipient: "alice", key: "videos/v4", size: 1)
    #expect(try await http.mutation(fourth, as: "bob", id: 4).status == 400)
    let longID = VideoCommandJSON.uploaded(
      video: String(repeating: "x", count: 65),
      recipient: "alice",
      key: "k",
      size: 1
    )
    #expect(try await http.mutation(longID, as: "carol", id: 1).status == 400)
    func token(_ token: String, client: String) async throws -> Int {
      try await http.send(
        "POST",
        "api/v1/push_tokens",
        as: "carol",
        body: Data("token=\(token)&client_id=\(client)".utf8),
        contentType: "application/x-www-form-urlencoded"
      ).status
    }
    #expect(try await token(String(repeating: "t", count: 4097), client: "c0") == 400)
    for index in 0..<EventServerConfiguration().maximumClientsPerUser {
      #expect(try await token("token\(index)", client: "c\(index)") == 200)
    }
    #expect(try await token("one-too-many", client: "c-extra") == 400)
    #expect(try await live.trackedVideoCount() == 3)
    try await live.stop()
  }

  @Test("7. a connection flood is capped: idle connections are refused or closed, and normal requests are answered")
  func connectionFloodCapped() async throws {
    let live = try await LiveServer.start { configuration in
      configuration.connections.maximumConnections = 64
      configuration.connections.maximumUnauthenticatedPerPeer = 8
      configuration.connections.unauthenticatedTimeout = .milliseconds(500)
    }
    defer { live.removeData() }
    let port = live.port
    let flood = await offThePool { (0..<200).compactMap { _ in IdleConnection(from: "127.0.0.2", to: port) } }
    #expect(flood.count > 8, "the flood connected")
    let http = RawHTTP(base: live.url)
    for _ in 0..<5 {
      let answer = try await http.send("GET", "api/v1/uploads", query: ["key": "videos/x"], as: "alice")
      #expect(answer.status == 200)
    }
    // Every flood connection is closed by the server: at once past the per-peer cap, the rest after 500 ms.
    let closed = await offThePool { flood.filter(\.isClosedByServer).count }
    #expect(closed == flood.count)
    try await live.stop()
  }

  @Test("8. errors do not leak internals: 413 for a body over its limit, a stable message for undecodable JSON")
  func errorsDoNotLeak() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let big = try await http.send(
      "POST",
      "api/v1/mutations",
      as: "alice",
      body: Data(repeating: 0x20, count: 2 << 20),
      contentType: "application/json"
    )
    #expect(big.status == 413)
    #expect(big.code == "BAD_REQUEST")
    #expect(!big.text.contains("NIO") && !big.text.contains("Error"))
    for body in ["{", #"{"client_id":"c","mutation_id":1}"#, #"{"client_id":"c","mutation_id":1,"mutation":{"x":1}}"#] {
      let answer = try await http.send(
        "POST",
        "api/v1/mutations",
        as: "alice",
        body: Data(body.utf8),
        contentType: "application/json"
      )
      #expect(answer.status == 400)
      for leak in ["DecodingError", "keyNotFound", "typeMismatch", "dataCorrupted", "CodingKeys", "Swift."] {
        #expect(!answer.text.contains(leak), "\(body) answered with \(answer.text)")
      }
    }
    try await live.stop()
  }

  @Test(
    "9. the server refuses what the spec refuses: mutation_id 0 and 2^64-1, event types and keys off their patterns"
  )
  func specAgreement() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let video = VideoCommandJSON.uploaded(video: "v1", recipient: "bob", key: "videos/v1", size: 1)
    for id in [UInt64(0), UInt64.max] {
      #expect(try await http.mutation(video, as: "alice", id: id).status == 400)
    }
    let register = try await http.send(
      "POST",
      "api/v1/register",
      as: "alice",
      body: Data("event_types=%5B%22Bad%20Type%22%5D".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    #expect(register.status == 400)
    for key in ["../etc/passwd", "videos/.hidden", "a b", String(repeating: "k", count: 161)] {
      #expect(try await http.send("GET", "api/v1/uploads", query: ["key": key], as: "alice").status == 400)
    }
    #expect(try await live.events.application.videos.isEmpty)
    try await live.stop()
  }

  @Test("an unauthenticated peer reaches nothing: every route is 401 without a key and with a wrong one")
  func unauthenticatedPeer() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let routes: [(String, String, [String: String])] = [
      ("POST", "api/v1/register", [:]),
      ("GET", "api/v1/events", ["queue_id": "q", "last_event_id": "-1"]),
      ("DELETE", "api/v1/events", ["queue_id": "q"]),
      ("POST", "api/v1/mutations", [:]),
      ("POST", "api/v1/push_tokens", [:]),
      ("GET", "api/v1/uploads", ["key": "k"]),
      ("PUT", "api/v1/uploads", ["key": "k", "offset": "0"]),
      ("POST", "api/v1/uploads/complete", ["key": "k"]),
      ("GET", "api/v1/blobs/info", ["key": "k"]),
      ("GET", "api/v1/blobs", ["key": "k"]),
    ]
    for (method, path, query) in routes {
      #expect(try await http.send(method, path, query: query).status == 401, "\(method) \(path)")
      #expect(try await http.send(method, path, query: query, as: "alice", key: "alice-key-2").status == 401)
      #expect(try await http.send(method, path, query: query, as: "mallory", key: "alice-key-1").status == 401)
    }
    try await live.stop()
  }

  @Test("a stolen device's key reaches only its user's queues: Bob's key cannot poll or delete Alice's queue")
  func stolenKeyReachesOnlyItsUser() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let register = try await http.send("POST", "api/v1/register", as: "alice")
    let queueID = try #require(
      (try JSONSerialization.jsonObject(with: register.body) as? [String: Any])?["queue_id"] as? String
    )
    let poll = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queueID, "last_event_id": "-1", "dont_block": "true"],
      as: "bob"
    )
    #expect(poll.status == 400 && poll.code == "BAD_EVENT_QUEUE_ID")
    #expect(try await http.send("DELETE", "api/v1/events", query: ["queue_id": queueID], as: "bob").status == 400)
    #expect(try await live.events.queueCount == 1)
    try await live.stop()
  }

  @Test("the host's own accounts plug in through Authenticator; API keys under the minimum are refused at start")
  func pluggableAuthentication() async throws {
    // The example of docs/security.md, "Authentication is pluggable", kept compiling here.
    struct SessionTokens: Authenticator {
      let sessions: [String: UserID]
      func user(authorization: String?) async -> UserID? {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
        return sessions[String(authorization.dropFirst(7))]
      }
    }
    #expect(throws: APIKeysError.self) { try APIKeys(["alice": "1234567"]) }
    #expect(throws: APIKeysError.self) { try APIKeys.parse("alice:1234567") }
    let configuration = EventHTTPServerConfiguration(authenticator: SessionTokens(sessions: [:]))
    #expect(await configuration.authenticator.user(authorization: "Bearer s3ssion-of-alice") == nil)
    let live = try await LiveServer.start {
      $0.authenticator = SessionTokens(sessions: ["s3ssion-of-alice": "alice"])
    }
    defer { live.removeData() }
    #expect(try await RawHTTP(base: live.url).send("POST", "api/v1/register", bearer: "s3ssion-of-alice").status == 200)
    #expect(try await RawHTTP(base: live.url).send("POST", "api/v1/register", as: "alice").status == 401)
    try await live.stop()
  }
}

/// Runs blocking socket work on a Dispatch thread, not on the cooperative pool the in-process servers need.
func offThePool<Value: Sendable>(_ work: @escaping @Sendable () -> Value) async -> Value {
  await withCheckedContinuation { continuation in
    DispatchQueue.global().async { continuation.resume(returning: work()) }
  }
}
