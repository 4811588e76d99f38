import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine
import UpdateMachineTesting

/// The numbered cases of docs/episode-queue.md §5 that need devices: two devices P and T of ann (0 and 1),
/// and vic's device V (2), on the real engine cores against the server core.
@Suite("EpisodeQueue on devices: §5 cases with P, T and V")
struct EpisodeQueueDeviceTests {
  @Test("1. n = 3, two favorites, P fetches: 6 queued, T identical")
  func fetchSyncsBothDevices() {
    var ann = Listeners(["ann", "ann"])
    for index in 0..<4 {
      ann.publish(EpisodeID(rawValue: "a\(index)"), "airtalk", hoursAgo: Double(10 - index))
      ann.publish(EpisodeID(rawValue: "b\(index)"), "brief", hoursAgo: Double(10 - index))
    }
    ann.world.submit(.setSettings(EpisodeSettings(n: 3)), on: 0)
    ann.world.submit(.favorite("airtalk"), on: 0)
    ann.world.submit(.favorite("brief"), on: 1)
    ann.settle()
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    #expect(ann.queue(0) == ["a3", "a2", "a1", "b3", "b2", "b1"])
    #expect(ann.confirmed(1) == ann.confirmed(0))
    #expect(ann.downloads[1].files.count == 6)
  }

  @Test("2. P and T fetch at once: each episode added once")
  func concurrentFetches() {
    var ann = Listeners(["ann", "ann"])
    for index in 0..<3 { ann.publish(EpisodeID(rawValue: "e\(index)"), "airtalk", hoursAgo: Double(5 - index)) }
    ann.world.submit(.favorite("airtalk"), on: 0)
    ann.settle()
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 1)
    ann.settle()
    #expect(ann.queue(0).sorted() == ["e0", "e1", "e2"])
    #expect(ann.confirmed(1) == ann.confirmed(0))
  }

  @Test("4. E finished on P, T fetches: E is not re-added, newer ones are")
  func finishedNotRefetched() {
    var ann = Listeners(["ann", "ann"])
    ann.publish("e1", "airtalk", hoursAgo: 5)
    ann.world.submit(.favorite("airtalk"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    ann.world.submit(.markFinished("e1", at: ann.now), on: 0)
    ann.publish("e2", "airtalk", hoursAgo: 1)
    ann.settle()
    ann.world.submit(.fetchNew(shows: nil), on: 1)
    ann.settle()
    #expect(ann.queue(1) == ["e2"])
    #expect(ann.confirmed(1).terminal("e1")?.finished == true)
  }

  @Test("5. T dismisses E while P downloads it: P cancels and deletes the partial file, also across a restart")
  func dismissCancelsDownload() {
    var ann = Listeners(["ann", "ann"])
    ann.publish("e1", "airtalk")
    ann.holding = ["e1"]
    ann.world.submit(.favorite("airtalk"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    #expect(ann.downloads[0].inFlight["e1"] == 1)
    ann.downloads[0].downloadInterrupted("e1")
    ann.world.crash(0)
    ann.downloads[0].restarted()
    #expect(ann.downloads[0].files["e1"]?.complete == false)
    ann.world.submit(.dismiss("e1", at: ann.now), on: 1)
    ann.settle(online: [1])
    // P restarts with the old confirmed state: nothing to delete yet, nothing started.
    ann.syncDownloads(0)
    ann.settle()
    #expect(ann.downloads[0].files["e1"] == nil)
    #expect(ann.downloads[0].inFlight.isEmpty)
  }

  @Test("6 and 7. P offline 31 days with a stale outbox: both entries superseded, nothing downloaded before register")
  func monthOffline() {
    var ann = Listeners(["ann", "ann"])
    ann.publish("e1", "airtalk", hoursAgo: 3)
    ann.publish("e2", "airtalk", hoursAgo: 2)
    ann.publish("e3", "airtalk", hoursAgo: 1)
    ann.world.submit(.favorite("airtalk"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    ann.world.submit(.dismiss("e2", at: ann.now), on: 0)
    ann.settle()
    let staleBasis = ann.confirmed(0).terminal("e2")!.terminalRev - 1
    // P goes offline with two writes in its outbox.
    ann.world.submit(.updatePosition("e1", seconds: 600, at: ann.now, device: "P"), on: 0)
    ann.world.submit(.enqueue("e2", .top, basis: staleBasis), on: 0)
    ann.world.submit(.markFinished("e1", at: ann.now), on: 1)
    ann.world.submit(.markFinished("e3", at: ann.now), on: 1)
    ann.settle(online: [1])
    ann.world.advance(to: ann.now.advanced(by: .seconds(31 * 24 * 3600)))
    // P restarts stale: e3 is queued in what it holds, finished on the server. Nothing starts.
    ann.world.crash(0)
    ann.downloads[0].restarted()
    let before = ann.started.count
    ann.syncDownloads(0)
    #expect(ann.started.count == before)
    ann.settle()
    #expect(ann.confirmed(0).terminal("e1")?.finished == true)
    #expect(ann.confirmed(0).terminal("e2") != nil)
    #expect(ann.confirmed(0).queue.isEmpty)
    #expect(ann.world.server.application.superseded.contains { $0.contains("position of e1") })
    #expect(ann.world.server.application.superseded.contains { $0.contains("enqueue of e2 with basis") })
    #expect(ann.downloads[0].files.isEmpty)
    #expect(ann.started.allSatisfy { $0.confirmed })
  }

  @Test("8. P moves A to the top, T moves C after B: both hold, and the devices converge")
  func independentMoves() {
    var ann = Listeners(["ann", "ann"])
    for (index, id) in ["A", "B", "C", "D"].enumerated() {
      ann.publish(EpisodeID(rawValue: id), "s", hoursAgo: Double(index))
    }
    ann.world.submit(.favorite("s"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    #expect(ann.queue(0) == ["A", "B", "C", "D"])
    ann.world.submit(.move("D", .top), on: 0)
    ann.world.submit(.move("A", .after("B")), on: 1)
    ann.settle()
    #expect(ann.queue(0) == ["D", "B", "A", "C"])
    #expect(ann.confirmed(1) == ann.confirmed(0))
  }

  @Test("17 and 18. Edits reach holders without a download; new media replaces queued files, not finished ones")
  func editsAndMedia() {
    var ann = Listeners(["ann", "ann", "vic"])
    ann.publish("e1", "s", hoursAgo: 2)
    ann.publish("e2", "s", hoursAgo: 1)
    ann.world.submit(.favorite("s"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.world.submit(.favorite("s"), on: 2)
    ann.world.submit(.fetchNew(shows: nil), on: 2)
    ann.settle()
    ann.world.submit(.markFinished("e1", at: ann.now), on: 2)
    ann.settle()
    let startedBefore = ann.started.count
    ann.admin(.editMeta("e2", title: "New title", url: "https://media.example/e2.mp3", newMedia: false))
    ann.settle()
    #expect(ann.confirmed(1).meta["e2"]?.title == "New title")
    #expect(ann.started.count == startedBefore)
    ann.admin(.editMeta("e1", title: "e1 v3", url: "https://media.example/e1b.mp3", newMedia: true))
    ann.settle()
    // ann still has e1 queued: both devices fetch the new file; vic finished it: nothing.
    #expect(ann.downloads[0].files["e1"]?.mediaVersion == 2)
    #expect(ann.downloads[1].files["e1"]?.mediaVersion == 2)
    #expect(ann.downloads[2].files["e1"] == nil)
    #expect(ann.confirmed(2).meta["e1"]?.metaVersion == 2)
  }

  @Test("19. Unpublish mid-playback: hidden, files deleted, vic sees nothing; republish: back for queued holders only")
  func unpublishAndRepublish() {
    var ann = Listeners(["ann", "ann", "vic"])
    ann.publish("e1", "s", hoursAgo: 2)
    ann.world.submit(.favorite("s"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    #expect(ann.downloads[0].files["e1"] != nil)
    ann.admin(.unpublish("e1"))
    ann.settle()
    #expect(ann.confirmed(0).meta["e1"]?.available == false)
    #expect(ann.downloads[0].files.isEmpty && ann.downloads[1].files.isEmpty)
    ann.world.submit(.favorite("s"), on: 2)
    ann.world.submit(.fetchNew(shows: nil), on: 2)
    ann.settle()
    #expect(ann.queue(2).isEmpty)
    let meta = ann.world.server.application.meta(of: "e1")!
    ann.admin(.publish("e1", meta))
    ann.settle()
    #expect(ann.confirmed(0).meta["e1"]?.available == true)
    #expect(ann.downloads[0].files["e1"] != nil)
    // Vic's watermark predates the republish: his next fetch finds it.
    ann.world.submit(.fetchNew(shows: nil), on: 2)
    ann.settle()
    #expect(ann.queue(2) == ["e1"])
  }

  @Test("22. A server restart from its dumped queues: nothing duplicated or lost")
  func serverRestart() {
    var ann = Listeners(["ann", "ann"])
    for index in 0..<3 { ann.publish(EpisodeID(rawValue: "e\(index)"), "s", hoursAgo: Double(5 - index)) }
    ann.world.submit(.favorite("s"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.world.restartServer()
    ann.world.submit(.markFinished("e0", at: ann.now), on: 1)
    ann.world.restartServer()
    ann.settle()
    #expect(ann.queue(0) == ["e2", "e1"])
    #expect(ann.confirmed(1) == ann.confirmed(0))
    #expect(ann.confirmed(0) == ann.snapshot("ann"))
  }

  @Test("23. A queue overflow forces a re-register: the device converges, and downloads nothing while stale")
  func overflowForcesRegister() {
    var configuration = EventServerConfiguration()
    configuration.maximumEventsPerQueue = 6
    var ann = Listeners(["ann", "ann"], server: configuration)
    for index in 0..<3 { ann.publish(EpisodeID(rawValue: "e\(index)"), "s", hoursAgo: Double(5 - index)) }
    ann.world.submit(.favorite("s"), on: 0)
    ann.world.submit(.fetchNew(shows: nil), on: 0)
    ann.settle()
    let queueBefore = ann.world.devices[0].core.phase.finger?.queueID
    // While P is away, T makes more changes than P's queue may hold: the server drops P's queue. (T sends
    // each before the next: unsent positions of one episode would replace each other in its outbox.)
    for index in 0..<8 {
      ann.world.submit(
        .updatePosition("e1", seconds: index * 10, at: ann.now.advanced(by: .seconds(index)), device: "T"),
        on: 1
      )
      ann.settle(online: [1])
      ann.world.advance(to: ann.now.advanced(by: .seconds(1)))
    }
    ann.world.submit(.markFinished("e2", at: ann.now), on: 1)
    ann.settle(online: [1])
    ann.world.crash(0)
    let before = ann.started.count
    ann.syncDownloads(0)
    #expect(ann.started.count == before)
    ann.settle()
    // The old queue was dropped on overflow; P registered a new one.
    #expect(ann.world.server.queue(queueBefore!) == nil)
    #expect(ann.world.devices[0].core.phase.finger?.queueID != queueBefore)
    #expect(ann.confirmed(0) == ann.snapshot("ann"))
    #expect(ann.confirmed(0).terminal("e2")?.finished == true)
    #expect(ann.downloads[0].files["e2"] == nil)
    #expect(ann.started.allSatisfy { $0.confirmed })
  }

  @Test("The history keeps the last 200 terminal records; restoring one lets the next older back in, on device too")
  func historyTrimmedAndRefilled() {
    var ann = Listeners(["ann"])
    let episodes = (0..<205).map { EpisodeID(rawValue: String(format: "e%03d", $0)) }
    for (index, episode) in episodes.enumerated() { ann.publish(episode, "s", hoursAgo: Double(300 - index)) }
    for episode in episodes {
      ann.world.submit(.enqueue(episode, .bottom, basis: nil), on: 0)
      ann.world.submit(.markFinished(episode, at: ann.now), on: 0)
    }
    ann.settle()
    #expect(ann.confirmed(0).history.count == 200)
    #expect(ann.confirmed(0).history.first?.episode == "e005")
    #expect(ann.confirmed(0).meta.count == 200)
    let restored: EpisodeID = "e100"
    let basis = ann.confirmed(0).terminal(restored)!.terminalRev
    ann.world.submit(.enqueue(restored, .top, basis: basis), on: 0)
    ann.settle()
    #expect(ann.confirmed(0).history.count == 200)
    #expect(ann.confirmed(0).history.first?.episode == "e004")
    #expect(ann.queue(0) == [restored])
    #expect(ann.confirmed(0) == ann.snapshot("ann"))
  }
}
