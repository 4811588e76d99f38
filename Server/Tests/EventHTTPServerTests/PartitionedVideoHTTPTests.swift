import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import TestScheduling
import Testing
import UpdateMachine
import VideoBlobRoutes
import VideoMessaging

/// The video service on a partitioned cluster: two nodes, four partitions, the files in the database. Each
/// client talks to the node that does not serve it, so every blob request is forwarded (ranges and upload
/// chunks included) to the node of its user's partition.
@Suite(
  "The video service on partitioned nodes: uploads and ranged downloads through either node",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedVideoHTTPTests {
  typealias Cluster = PartitionedHTTPTests.TwoNodes<StoredVideoServer>

  static func startNode(
    on log: PostgresServerLog,
    rotation: Int
  ) async throws
    -> PartitionedHTTPTests.Running<
      StoredVideoServer
    >
  {
    let application = StoredVideoServer()
    let blobs = DatabaseBlobStore(log: log)
    let limits = RequestLimits()
    return try await PartitionedHTTPTests.start(application, on: log, rotation: rotation) { router, nodes, gate in
      let ledger = StoredVideoBlobLedger(application: application) { user in
        if let user { try await nodes.node(for: user) } else { try await nodes.anyNode() }
      }
      BlobRoutes(ledger: ledger, blobs: blobs, gate: gate, limits: limits) { Timestamp(Date()) }.add(to: router)
    }
  }

  /// `body`'s answer, sent again while it is `503` (a partition moving between the nodes: a slow machine's
  /// lease session may lapse and be taken again), as a client would; the suite's time limit bounds it.
  private func whileMoving<Value>(_ body: () async throws -> Value) async throws -> Value {
    while true {
      do {
        return try await body()
      } catch let error as BlobStoreError where error.detail.hasPrefix("HTTP 503") {
        try? await Task.sleep(for: .milliseconds(50))
      }
    }
  }

  private func store(_ url: URL, _ user: UserID) -> HTTPBlobStore {
    HTTPBlobStore(endpoint: HTTPEndpoint(baseURL: url, credentials: .init(user: user, apiKey: testKeyByUser[user]!)))
  }

  @Test(
    "an upload through the other node resumes; the recipient reads ranges through the other node; others are refused"
  )
  func uploadAndDownloadForwarded() async throws {
    let cluster = try await Cluster.start { log, rotation in try await Self.startNode(on: log, rotation: rotation) }
    let servedByA = await cluster.nodeA.server.host?.partitionsServed ?? []
    // Each user's requests go to the node that does not serve the user's partition.
    func otherNode(_ user: UserID) -> URL {
      servedByA.contains(cluster.map.partition(of: user)) ? cluster.nodeB.url : cluster.nodeA.url
    }
    let key = BlobKey(rawValue: "videos/partitioned")
    let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let alice = store(otherNode("alice"), "alice")
    try await whileMoving { try await alice.append(bytes.prefix(70_000), to: key, at: 0) }
    let resumeAt = try await whileMoving { try await alice.partialLength(key) }
    #expect(resumeAt == 70_000)
    try await whileMoving { try await alice.append(bytes.suffix(from: resumeAt), to: key, at: resumeAt) }
    try await whileMoving { try await alice.complete(key, at: Timestamp(Date())) }
    var servingAlice = await cluster.nodeA.server.host?.node(for: "alice")
    if servingAlice == nil { servingAlice = await cluster.nodeB.server.host?.node(for: "alice") }
    let alicesNode = try #require(servingAlice)
    try await alicesNode.handle(
      .request(.uploaded(VideoUpload(video: "v1", recipient: "bob", blobKey: key, size: bytes.count))),
      from: "alice"
    )
    let bob = store(otherNode("bob"), "bob")
    #expect(try await whileMoving { try await bob.size(of: key) } == bytes.count)
    var received = Data()
    while received.count < bytes.count {
      let offset = received.count
      received += try await whileMoving { try await bob.read(key, offset: offset, length: 30_000) }
    }
    #expect(received == bytes)
    // The range itself reaches the serving node, and its answer's range comes back.
    let credentials = Data("bob:\(testKeyByUser["bob"]!)".utf8).base64EncodedString()
    var ranged: RawHTTP.Answer
    repeat {
      ranged = try await RawHTTP(base: otherNode("bob")).exchange(
        Data(
          ("GET /api/v1/blobs?key=videos%2Fpartitioned HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + "Authorization: Basic \(credentials)\r\nRange: bytes=10-19\r\n\r\n").utf8
        )
      )
    } while ranged.status == 503
    #expect(ranged.status == 206 && ranged.body == bytes.subdata(in: 10..<20))
    #expect(ranged.headers["content-range"] == "bytes 10-19/\(bytes.count)")
    // Bob may not write Alice's upload, and Carol may not read it, whichever node they reach.
    for url in [cluster.nodeA.url, cluster.nodeB.url] {
      do {
        try await whileMoving { try await store(url, "bob").append(Data([1]), to: key, at: 0) }
        Issue.record("bob wrote alice's upload")
      } catch {
        #expect((error as? BlobStoreError)?.isGone == true, "\(error)")
      }
      do {
        _ = try await whileMoving { try await store(url, "carol").size(of: key) }
        Issue.record("carol read a blob no video of hers names")
      } catch {
        #expect((error as? BlobStoreError)?.isGone == true, "\(error)")
      }
    }
    try await cluster.stop()
  }
}
