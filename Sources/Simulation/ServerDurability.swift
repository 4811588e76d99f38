import EventProtocol
import EventServer

/// The simulated server's durability, shared by both worlds: its storage (what a crash keeps), and the
/// world's happenings (answers, pushes) held until the records they show are durable.
///
/// Records become durable at a group commit ``commitDelay`` after the first one waits; a crash before it
/// loses them, and the answers held for them never leave the server.
struct ServerDurability<Application: ServerApplication & Codable, Happening> {
  /// How long a record waits for its group commit.
  static var commitDelay: Duration { .milliseconds(2) }
  /// Snapshot once the log holds this many records since the last one.
  static var snapshotEvery: Int { 2_000 }

  private(set) var storage = SimulatedServerStorage<Application>()
  /// A crash waiting for the worst moment: the next time records wait for their group commit.
  var isCrashArmed = false
  private var held: [(happening: Happening, delay: Duration)] = []
  private var commitScheduled = false

  /// Whether an armed crash should strike now (a group commit was just scheduled: records are pending);
  /// disarms it.
  mutating func takeArmedCrash() -> Bool {
    defer { isCrashArmed = false }
    return isCrashArmed
  }

  /// Takes what `server` recorded; returns whether a group commit must be scheduled now.
  mutating func collect(from server: inout EventServerStateMachine<Application>) -> Bool {
    storage.collect(from: &server)
    return needsCommit()
  }

  /// `happening` (after `delay`) shows the server's state now: it goes at once when that is durable, and is
  /// held for the group commit otherwise.
  /// - Returns: The happening to schedule now, or `nil` when held; and whether to schedule a group commit.
  mutating func emit(
    _ happening: Happening,
    after delay: Duration,
    server: inout EventServerStateMachine<Application>
  ) -> (now: (Happening, Duration)?, scheduleCommit: Bool) {
    storage.collect(from: &server)
    guard storage.appendedPosition > storage.durablePosition else { return ((happening, delay), false) }
    held.append((happening, delay))
    return (nil, needsCommit())
  }

  private mutating func needsCommit() -> Bool {
    guard storage.appendedPosition > storage.durablePosition, !commitScheduled else { return false }
    commitScheduled = true
    return true
  }

  /// The group commit: everything pending is durable; the held happenings go.
  mutating func commit(server: inout EventServerStateMachine<Application>) -> [(Happening, Duration)] {
    commitScheduled = false
    storage.collect(from: &server)
    storage.flush()
    if storage.durableRecordCount >= Self.snapshotEvery { storage.snapshot(of: &server) }
    defer { held = [] }
    return held
  }

  /// A graceful stop: everything is made durable and snapshotted; the held happenings go.
  mutating func stop(server: inout EventServerStateMachine<Application>) -> [(Happening, Duration)] {
    let released = commit(server: &server)
    storage.snapshot(of: &server)
    return released
  }

  /// A crash: pending records are lost with the happenings held for them (returned, for the world to turn
  /// into dropped connections); the server is rebuilt from what is durable.
  mutating func crash(
    application: Application,
    server: inout EventServerStateMachine<Application>,
    random: SeededRandomNumberGenerator,
    now: Timestamp
  ) -> [(Happening, Duration)] {
    let lost = held
    held = []
    commitScheduled = false
    do {
      server = try storage.crashed(
        application: application,
        configuration: server.configuration,
        random: random,
        now: now
      )
    } catch {
      preconditionFailure("the simulated server's own log did not replay: \(error)")
    }
    return lost
  }
}
