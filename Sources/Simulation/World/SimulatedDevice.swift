import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// One installation of the app inside the simulation: the engine's pure core, its persisted record (which
/// survives a kill), the domain's state beside it, and what the world tracks about it. A class: the
/// world reads and changes its devices at every step, and a struct was copied whole (every field retained)
/// on reads the optimiser could not prove in place; no world is ever copied, so nothing shares a device.
final class SimulatedDevice<Domain: SimulatedDomain> {
  typealias Application = Domain.Application
  typealias Core = UpdateMachineCore<Application.Snapshot, Application.Event, Application.Command>

  /// A request on its way.
  enum Exchange {
    case register
    case poll(EventFinger, dontBlock: Bool, limit: Int?)
    case submit(MutationBatch<Application.Command>)
    case fetch(FetchRequest, QueueID)
  }

  /// Whether the app's process can run code: on screen or in a background window (``running``), stopped by
  /// the OS with its memory kept (``suspended``), or gone (``terminated``: killed, reclaimed or force-quit).
  enum Process: Hashable {
    case running
    case suspended
    case terminated
  }

  let index: Int
  let user: UserID
  /// What happens to the device whatever the strategy.
  let script: DeviceScript
  /// The latency and faults of this device's requests and transfer steps.
  var requestRandom: SeededRandomNumberGenerator
  /// The fate of each push to this device.
  var pushRandom: SeededRandomNumberGenerator
  /// The engine's pure core; a change through it marks the shown freshness for working out again. The
  /// figures the world reads at every step go through ``reading(_:)`` instead: a stored struct read through
  /// a class reference for a call the optimiser cannot see into (the engine's methods live in another
  /// module) is copied whole first, every reference in it retained and released, even through this `_read`
  /// (5.5 % of the simulation's samples went to such copies).
  var core: Core {
    _read { yield engine }
    _modify {
      yield &engine
      shownFreshnessIsStale = true
    }
  }
  private var engine: Core
  /// The freshness the open app shows, by ``ShownFreshness/index(of:)``, as last worked out; worked out again
  /// only after the engine changed (``shownFreshnessIsStale``). The world samples it before every step, and
  /// asking the engine each time was about 3 % of the simulation's time. Between two changes of the engine
  /// only the end of its freshness debounce could change it, and that end is one of the engine's wake-ups:
  /// its timer fires then, which changes the engine.
  private var shownFreshness = 0
  private var shownFreshnessIsStale = true
  /// What the domain keeps beside the engine (the video app: its transfer queue and files).
  var extra: Domain.DeviceState
  /// What is on disk: the last record saved (its bytes are made when a kill needs them, which keeps the
  /// simulation fast; the restore then goes through the real bytes).
  var disk: PersistedRecord<Application.Snapshot, Application.Command>?
  var appOpen = false
  /// The script's session on screen now, if any.
  var session: Int?
  var process = Process.running
  /// The user force-quit the app: no push and no background time until the user opens it again.
  var forceQuit = false
  /// In the background and running: when the OS suspends the app.
  var runsUntil: Timestamp?
  var suspensionGeneration = 0
  /// Requests under way when the OS suspended the app: they fail when it runs again.
  var droppedAtSuspension: [(request: RequestID, exchange: Exchange)] = []
  /// Pushes the push service holds while the device is unreachable.
  var pushesHeldByService: [[UInt8]] = []
  /// The push the OS holds for a throttled background app (only the newest is kept).
  var pushHeldByOS: [UInt8]?
  /// The OS's silent-push budget: what is left, as of `pushBudgetAt`.
  var pushBudget = 0.0
  var pushBudgetAt: Timestamp
  /// A kill waits for the next step.
  var killArmed = false
  var online = true
  /// What the running app was last told of the network (it misses changes while suspended or gone).
  var toldOffline = false
  var outstanding: [RequestID: Exchange] = [:]
  var parked: [RequestID: PollID] = [:]
  var timerAt: Timestamp?
  var timerGeneration = 0
  /// The latest server version of the user's snapshot this device's confirmed state has shown.
  var shownVersion = 0
  /// Whether a request has succeeded since the last disconnection (freshness may say live only then).
  var reachedServer = false
  var lastFreshnessSample: Timestamp
  /// Seconds open in each freshness, by ``ShownFreshness/index(of:)`` (an array, not a dictionary by name: it is
  /// added to before every step of the world).
  var secondsByFreshness: [Double] = [0, 0, 0, 0]
  /// The shown state last recorded in ``freshnessChanges``: a ``ShownFreshness`` index, or -1.
  var lastShownIndex = -1
  /// Seconds open in each freshness that was shown, by name.
  var freshnessSeconds: [String: Double] {
    var seconds: [String: Double] = [:]
    for (index, value) in secondsByFreshness.enumerated() where value > 0 {
      seconds[ShownFreshness.names[index]] = value
    }
    return seconds
  }
  var wrongStatusSeconds = 0.0
  /// Whether the device shows a sent video's status behind the server's, as last worked out; recomputed
  /// only after the device's engine or its user's server state changed (`behindIsStale`).
  var isBehind = false
  var behindIsStale = true
  /// When the app, open, started showing a status the server had moved past.
  var wrongSince: Timestamp?
  /// When the shown freshness changed (at most 2,000 changes are kept).
  var freshnessChanges: [FreshnessChange] = []
  var longestWrongStatus = 0.0
  var openSeconds = 0.0
  /// When the app last opened (wrong statuses that start then are counted apart).
  var openedAt: Timestamp?
  /// Whether the wrong status under way started when the app opened.
  var wrongSinceOpening = false
  var requests = 0
  /// Bytes of sync requests and answers (with HTTP overhead).
  var bytes = 0
  /// Bytes of content the domain moved apart from sync (the video app's transfers).
  var contentBytes = 0
  var opens = 0
  /// The user's actions the script gave that the app took (the video app: recordings).
  var recordings = 0
  /// Of those, the ones saved on the device before anything could kill it (an app of yours: its writes).
  var actionsSaved = 0
  var kills = 0
  var wakes = 0
  var pushesDiscarded = 0
  var pushesThrottled = 0
  /// Pushes that reached the engine.
  var pushesDelivered = 0
  var registrations = 0
  /// How many times the app was killed: actions computed before a kill are not performed after it.
  var epoch = 0
  var pushesLost = 0

  init(
    index: Int,
    user: UserID,
    script: DeviceScript,
    seed: UInt64,
    core: Core,
    extra: Domain.DeviceState,
    now: Timestamp
  ) {
    self.index = index
    self.user = user
    self.script = script
    self.requestRandom = RandomStream.requests.generator(seed: seed, device: index)
    self.pushRandom = RandomStream.pushes.generator(seed: seed, device: index)
    self.engine = core
    self.extra = extra
    self.lastFreshnessSample = now
    self.pushBudgetAt = now
  }

  /// Whether the app can run code now.
  var isRunning: Bool { appOpen || process == .running }

  /// `body`'s answer from the engine, read in place: an exclusive access is the one the optimiser does not
  /// turn into a copy. `body` must not change the engine (a change goes through ``core``).
  private func reading<Result>(_ body: (inout Core) -> Result) -> Result { body(&engine) }

  // The engine's figures the world reads at every step, read in place.
  var confirmedState: Application.Snapshot? { reading { $0.confirmedState } }
  var displayedState: Application.Snapshot? { reading { $0.displayedState } }
  var phase: Phase { reading { $0.phase } }
  var pendingMutations: [OutboxEntry<Application.Command>] { reading { $0.pendingMutations } }
  var isConfirmedThisSession: Bool { reading { $0.isConfirmedThisSession } }
  var clientID: ClientID? { reading { $0.clientID } }
  var isLoaded: Bool { reading { $0.isLoaded } }
  func nextWakeUp(after now: Timestamp) -> Timestamp? { reading { $0.nextWakeUp(after: now) } }

  /// The freshness the open app shows now, by ``ShownFreshness/index(of:)``.
  func shownFreshnessIndex(now: Timestamp) -> Int {
    if shownFreshnessIsStale {
      shownFreshness = reading { ShownFreshness.index(of: $0.freshness(now: now).freshness) }
      shownFreshnessIsStale = false
    }
    return shownFreshness
  }
}

/// What a device shows about its data, as the report names it: a freshness while the app is open, or
/// closed; counted by index (the world adds to these before every step).
enum ShownFreshness {
  /// Each freshness's name, by ``index(of:)``, then the closed app's.
  static let names = ["live", "settling", "connecting", "cannot connect", "closed"]
  /// The closed app's index in ``names``.
  static let closed = 4

  /// A freshness's index in ``names``.
  static func index(of freshness: Freshness) -> Int {
    switch freshness {
    case .live: 0
    case .settling: 1
    case .connecting: 2
    case .cannotConnect: 3
    }
  }
}
