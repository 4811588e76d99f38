import EpisodeQueue
import EventHTTPServer
import EventProtocol
import Foundation
import Logging
import TestScheduling
import Testing
import UpdateMachine

/// The same HTTP server with another application plugged in: the podcast episode queue.
@Suite("Live HTTP server with the episode-queue application", .hangGuard)
struct EpisodesOverHTTPTests {
  typealias Machine = UpdateMachine<EpisodeProjection, EpisodeEvent, EpisodeCommand>

  @Test("the broadcaster publishes, a listener's two devices fetch and finish over HTTP, and converge")
  func episodesConverge() async throws {
    var configuration = EventHTTPServerConfiguration(
      keys: try APIKeys(["kpcc": "kpcc-key-1", "ann": "ann-key-12"])
    )
    configuration.port = 0
    var logger = Logger(label: "episodes-test")
    logger.logLevel = .warning
    let server = EventHTTPServer(
      application: EpisodeServer(admins: ["kpcc"]),
      configuration: configuration,
      logger: logger
    )
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task { try await server.run(handleSignals: false) { continuation.yield($0) } }
    var iterator = ports.makeAsyncIterator()
    let port = try #require(await iterator.next())
    let url = URL(string: "http://127.0.0.1:\(port)")!
    func machine(_ user: UserID, _ key: String) -> Machine {
      UpdateMachine(
        reducer: EpisodeReducer(),
        transport: URLSessionTransport(baseURL: url, credentials: .init(user: user, apiKey: key)),
        store: InMemoryStore()
      )
    }
    let broadcaster = machine("kpcc", "kpcc-key-1")
    let phone = machine("ann", "ann-key-12")
    let tablet = machine("ann", "ann-key-12")
    for device in [broadcaster, phone, tablet] { await device.start() }
    let published = Timestamp(Date()).advanced(by: .seconds(-60))
    for index in 0..<3 {
      let meta = EpisodeMeta(
        show: "airtalk",
        title: "AirTalk \(index)",
        url: "https://m/\(index).mp3",
        publishedAt: published
      )
      _ = await broadcaster.submit(.admin(.publish(EpisodeID(rawValue: "e\(index)"), meta)))
    }
    for await snapshot in await broadcaster.snapshots() where snapshot.pendingMutations.isEmpty { break }
    _ = await phone.submit(.favorite("airtalk"))
    _ = await phone.submit(.fetchNew(shows: nil))
    for await snapshot in await tablet.snapshots() where snapshot.confirmedState?.queue.count == 3 { break }
    _ = await tablet.submit(.markFinished("e0", at: Timestamp(Date())))
    var phoneState: EpisodeProjection?
    for await snapshot in await phone.snapshots() where snapshot.confirmedState?.terminal("e0") != nil {
      phoneState = snapshot.confirmedState
      break
    }
    for await snapshot in await tablet.snapshots()
    where snapshot.pendingMutations.isEmpty && snapshot.confirmedState == phoneState {
      break
    }
    #expect(phoneState?.queue.map(\.episode) == ["e2", "e1"])
    #expect(await phone.snapshot.isConfirmedThisSession)
    for device in [broadcaster, phone, tablet] { await device.stop() }
    await server.shutdown()
    try await running.value
  }
}
