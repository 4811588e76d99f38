import EventProtocol
import EventServer
import Foundation
import Logging

/// Brings the state of a server written before the input log (`application.json` and `queues.json`) into
/// an empty log as its first snapshot, so an upgrade keeps every user's data and queue; the old files are
/// renamed `*.imported`, never deleted.
struct LegacyDumpImport {
  let directory: URL
  let logger: Logger

  func importIfNeeded<Application: ServerApplication & Codable>(
    into log: any ServerLog,
    application: Application.Type
  ) async throws {
    let applicationURL = directory.appendingPathComponent("application.json")
    let queuesURL = directory.appendingPathComponent("queues.json")
    guard FileManager.default.fileExists(atPath: applicationURL.path) else { return }
    let stored = try await log.load()
    guard stored.snapshot == nil, stored.records.isEmpty else {
      logger.warning("\(applicationURL.path) is ignored: the input log already holds state")
      return
    }
    let state: Application
    do {
      state = try JSONDecoder().decode(Application.self, from: Data(contentsOf: applicationURL))
    } catch {
      throw StateError("cannot read the application state \(applicationURL.path): \(error)")
    }
    var queues = QueueDump<Application.Event>(queues: [])
    if FileManager.default.fileExists(atPath: queuesURL.path) {
      do {
        queues = try QueueDump<Application.Event>.decode(Data(contentsOf: queuesURL))
      } catch {
        // Clients re-register: nothing they hold is lost, only the queues.
        logger.error("queue dump not imported: \(error)")
      }
    }
    let snapshot = ServerSnapshot(position: 0, application: state, queues: queues, nextSweepAt: Timestamp(Date()))
    try await log.saveSnapshot(StoredSnapshot(position: 0, bytes: try snapshot.encoded()))
    for url in [applicationURL, queuesURL] where FileManager.default.fileExists(atPath: url.path) {
      try FileManager.default.moveItem(at: url, to: url.appendingPathExtension("imported"))
    }
    logger.info(
      "imported the state of an older server into the input log",
      metadata: ["queues": "\(queues.queues.count)"]
    )
  }
}
