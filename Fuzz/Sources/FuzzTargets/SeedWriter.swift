import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// Writes a seed corpus for each target from real encodings, so the fuzzer starts from valid inputs
/// (`FUZZ_WRITE_SEEDS=Fuzz/Corpus` in `Fuzz/run --write-seeds`).
enum SeedWriter {
  static func write(to folder: URL) throws {
    var server = FuzzServer(application: FuzzBoard(), random: SeededRandomNumberGenerator(seed: 9), now: fuzzStart)
    let (registration, _) = server.register(user: "a", eventTypes: nil, lifespan: .seconds(3600), now: fuzzStart)
    let command = FuzzBoard.Command.post("hello", to: ["a", "b"])
    _ = try server.applyMutation(
      command,
      from: "a",
      clientID: "client-1",
      mutationID: MutationID(1),
      digest: MutationDigest(of: command),
      now: fuzzStart
    )
    _ = try server.handle(.post("second", to: ["a"]), from: "b", now: fuzzStart)
    let events = server.queues[registration.queueID]!.events

    var core = FuzzCore(reducer: FuzzReducer(), random: SeededRandomNumberGenerator(seed: 4))
    _ = core.loaded(nil, now: fuzzStart)
    _ = core.registerSucceeded(RequestID(rawValue: 1), registration, now: fuzzStart)
    _ = core.submit(.post("offline", to: ["b"]), now: fuzzStart)

    let seeds: [(String, String, Data)] = [
      ("wire", "registration.json", try WireFormat.encode(registration)),
      ("wire", "events.json", try WireFormat.encode(EventsReply(events: events, queueID: registration.queueID))),
      ("wire", "error.json", try WireFormat.encode(EventAPIError.rateLimitHit(retryAfter: .seconds(3)))),
      ("wire", "reused.json", try WireFormat.encode(EventAPIError.mutationIDReused(MutationID(4)))),
      ("dump", "dump.json", try WireFormat.encode(server.dump())),
      ("record", "record.json", try core.persistedRecord().encoded()),
      ("machines", "schedule.bin", Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37) })),
    ]
    for (target, name, data) in seeds {
      let directory = folder.appendingPathComponent(target)
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      try data.write(to: directory.appendingPathComponent(name))
    }
  }
}
