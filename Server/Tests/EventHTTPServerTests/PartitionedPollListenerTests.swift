import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing
import UpdateMachine

/// The lean poll listener on the nodes of a partitioned cluster: a poll of a user another node serves is
/// forwarded to that node's poll listener, under the same rules as the main listener's forwarding.
@Suite(
  "The lean poll listener on partitioned nodes: polls forwarded to the partition's node",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedPollListenerTests {
  typealias Cluster = PartitionedHTTPTests.TwoNodes<StoredNoteBoard>
  typealias NotesTransport = PartitionedHTTPTests.NotesTransport

  /// Two note board nodes, each with a lean poll listener, the first's grace `grace`.
  private static func start(grace: Duration = .seconds(10)) async throws -> Cluster {
    try await Cluster.start { log, rotation in
      try await PartitionedHTTPTests.start(
        StoredNoteBoard(),
        on: log,
        rotation: rotation,
        configure: {
          $0.pollPort = 0
          $0.shutdownGrace = grace
        }
      )
    }
  }

  /// A test user whose partition node A serves (not node B).
  private static func userOfA(in cluster: Cluster) async throws -> UserID {
    let servedByB = await cluster.nodeB.server.host?.partitionsServed ?? []
    let candidates: [UserID] = ["alice", "bob", "carol"]
    return try #require(candidates.first { !servedByB.contains(cluster.map.partition(of: $0)) })
  }

  /// Posts `text` to `user` through node B's main listener.
  private static func post(_ text: String, to user: UserID, cluster: Cluster, id: UInt64) async throws {
    let carol = NotesTransport(
      baseURL: cluster.nodeB.url,
      credentials: HTTPCredentials(user: "carol", apiKey: testKeyByUser["carol"]!)
    )
    let request = MutationRequest(
      clientID: ClientID("carol-test"),
      mutationID: MutationID(id),
      mutation: NoteBoard.Command.post(text, to: [user])
    )
    _ = try await carol.submit(request, queueID: nil)
  }

  /// Waits (within the suite's time limit) until a poll of `user` is parked on `node`.
  private static func waitUntilParked(on node: PartitionedHTTPTests.Running<StoredNoteBoard>, user: UserID) async throws
  {
    while await node.server.host?.node(for: user)?.parkedPollCount ?? 0 < 1 {
      try await Task.sleep(for: .milliseconds(20))
    }
  }

  private static func queueID(of answer: RawHTTP.Answer) throws -> String {
    try #require((try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["queue_id"] as? String)
  }

  private static func eventCount(of answer: RawHTTP.Answer) -> Int {
    let object = try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
    return (object?["events"] as? [Any])?.count ?? -1
  }

  @Test("node B's poll listener forwards another node's user's polls and deletes to node A's poll listener")
  func forwardedToThePollListener() async throws {
    let cluster = try await Self.start()
    let (nodeA, nodeB) = (cluster.nodeA, cluster.nodeB)
    let user = try await Self.userOfA(in: cluster)
    let pollsOfA = try #require(nodeA.pollURL)
    let pollsOfB = RawHTTP(base: try #require(nodeB.pollURL))
    // Node B knows where node A answers polls: its poll listener, not its main one.
    guard case .elsewhere(let address) = await nodeB.server.host?.pollPlacement(of: user) else {
      Issue.record("node B does not know where the user's polls are served")
      return
    }
    #expect(address == pollsOfA.absoluteString)

    let queue = try Self.queueID(of: try await RawHTTP(base: nodeB.url).send("POST", "api/v1/register", as: user))
    try await Self.post("one", to: user, cluster: cluster, id: 1)
    let query = ["queue_id": queue, "last_event_id": "-1", "dont_block": "true"]
    // A note from a user of another partition reaches the queue through the partition's inbox, after the
    // write is answered: wait for it.
    var direct = try await RawHTTP(base: pollsOfA).send("GET", "api/v1/events", query: query, as: user)
    while Self.eventCount(of: direct) < 1 {
      try await Task.sleep(for: .milliseconds(20))
      direct = try await RawHTTP(base: pollsOfA).send("GET", "api/v1/events", query: query, as: user)
    }
    let forwarded = try await pollsOfB.send("GET", "api/v1/events", query: query, as: user)
    #expect(forwarded.status == 200)
    #expect(Self.eventCount(of: forwarded) == 1)
    #expect(forwarded.body == direct.body)
    // Node B's main listener forwards the events route to node A's poll listener too.
    let viaMain = try await RawHTTP(base: nodeB.url).send("GET", "api/v1/events", query: query, as: user)
    #expect(viaMain.status == 200 && viaMain.body == direct.body)

    // A long-poll parks on node A through node B, and is woken by a write.
    async let parked = pollsOfB.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queue, "last_event_id": "0"],
      as: user
    )
    try await Self.waitUntilParked(on: cluster.nodeA, user: user)
    try await Self.post("two", to: user, cluster: cluster, id: 2)
    let woken = try await parked
    #expect(woken.status == 200)
    #expect(Self.eventCount(of: woken) == 1)
    #expect(woken.headers["connection"] == "close")

    // The same rules as the main listener's forwarding: a wrong key is refused where it arrives, a request
    // forwarded once is not forwarded again.
    let wrongKey = try await pollsOfB.send("GET", "api/v1/events", query: query, as: user, key: "not-the-key-of-anyone")
    #expect(wrongKey.status == 401)
    let credentials = Data("\(user.rawValue):\(testKeyByUser[user]!)".utf8).base64EncodedString()
    let looped = try await pollsOfB.exchange(
      Data(
        ("GET /api/v1/events?queue_id=\(queue)&last_event_id=-1&dont_block=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
          + "Connection: close\r\nAuthorization: Basic \(credentials)\r\nX-Event-Server-Forwarded: 1\r\n\r\n").utf8
      )
    )
    #expect(looped.status == 503)
    #expect(looped.headers["retry-after"] == "1")

    // A DELETE with the queue id in the form body, forwarded: the queue is gone on node A.
    let deleted = try await pollsOfB.send(
      "DELETE",
      "api/v1/events",
      as: user,
      body: Data("queue_id=\(queue)".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    #expect(deleted.status == 200)
    let gone = try await pollsOfB.send("GET", "api/v1/events", query: query, as: user)
    #expect(gone.status == 400 && gone.code == "BAD_EVENT_QUEUE_ID")
    try await cluster.stop()
  }

  /// Node B's stop answers the long-polls it forwarded (`503`, send again) at once: the grace is a minute, so
  /// a stop that waited for them would let node A's heartbeat answer first (`200`).
  @Test("a long-poll the poll listener forwarded is answered 503 when its node stops")
  func forwardedPollEndsAtStop() async throws {
    let cluster = try await Self.start(grace: .seconds(60))
    let nodeB = cluster.nodeB
    let user = try await Self.userOfA(in: cluster)
    let pollsOfB = RawHTTP(base: try #require(nodeB.pollURL))
    let queue = try Self.queueID(of: try await RawHTTP(base: nodeB.url).send("POST", "api/v1/register", as: user))
    async let parked = pollsOfB.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queue, "last_event_id": "-1"],
      as: user
    )
    try await Self.waitUntilParked(on: cluster.nodeA, user: user)
    await nodeB.server.shutdown()
    try await nodeB.task.value
    let answer = try await parked
    #expect(answer.status == 503)
    #expect(answer.headers["retry-after"] == "1")
    try await cluster.stop()
  }
}
