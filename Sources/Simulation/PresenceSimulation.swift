import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import VideoMessaging

/// What the second, ephemeral update machine of the video app costs: the presence machine ("who is
/// recording a video to you right now", `RecordingPresence`) on every device, over virtual time, with apps
/// opened and closed and recordings started, renewed and stopped.
///
/// Its own long-poll is the cost: a registration after every closed spell longer than its two-minute queue,
/// a parked poll and a heartbeat round trip every 45–55 s while the app is open, and a poll per event.
/// ``Report`` also says what would remain if one queue fed both machines (the presence events riding the
/// video machine's long-poll): the writes and the events' bytes, with no second registration, parked poll
/// or heartbeat.
public enum PresenceSimulation {
  /// The world to simulate.
  public struct Scenario: Sendable, Hashable {
    /// Devices, in pairs of friends (device 2k records to 2k+1 and back).
    public var devices = 20
    /// Simulated hours.
    public var hours = 4.0
    /// Drives every draw.
    public var seed: UInt64 = 1
    /// Mean length of an open spell of the app, in minutes.
    public var meanOpenMinutes = 5.0
    /// Mean length of a closed spell, in minutes.
    public var meanClosedMinutes = 25.0
    /// Recordings started per hour the app is open.
    public var recordingsPerOpenHour = 6.0
    /// How long a recording lasts, in seconds.
    public var recordingSeconds: ClosedRange<Int> = 10...60
    /// How often a recording is announced again (below the server's 30 s staleness).
    public var renewEvery: Duration = .seconds(20)

    /// The defaults.
    public init() {}
  }

  /// The costs, per device-hour.
  public struct Report: Sendable, Equatable, CustomStringConvertible {
    /// Device-hours simulated.
    public var deviceHours: Double
    /// The share of time apps were open.
    public var openShare: Double
    /// Requests of the presence machine: registrations, polls and writes.
    public var requestsPerDeviceHour: Double
    /// Their bytes, both ways, with 150 bytes of HTTP overhead each.
    public var bytesPerDeviceHour: Double
    /// Registrations (a queue lost while closed).
    public var registersPerDeviceHour: Double
    /// Polls answered with events.
    public var eventPollsPerDeviceHour: Double
    /// Polls answered with nothing (heartbeats, the first poll of a queue).
    public var emptyPollsPerDeviceHour: Double
    /// Writes (recording started, renewed, stopped).
    public var writesPerDeviceHour: Double
    /// Seconds a poll was parked on the server (a connection held).
    public var parkedSecondsPerDeviceHour: Double
    /// With one queue feeding both machines: requests that would remain (writes, and one round trip per
    /// event batch, which the video long-poll would make instead of this one).
    public var sharedQueueRequestsPerDeviceHour: Double
    /// With one queue: bytes that would remain (writes, event batches).
    public var sharedQueueBytesPerDeviceHour: Double

    public var description: String {
      """
      presence machine, \(String(format: "%.0f", deviceHours)) device-hours, apps open \(String(format: "%.0f", openShare * 100)) % of the time:
        its own long-poll:  \(f(requestsPerDeviceHour)) requests, \(f(bytesPerDeviceHour / 1000)) kB, \(f(parkedSecondsPerDeviceHour)) parked-poll seconds per device-hour
          registers \(f(registersPerDeviceHour)), polls with events \(f(eventPollsPerDeviceHour)), empty polls \(f(emptyPollsPerDeviceHour)), writes \(f(writesPerDeviceHour))
        one queue for both: \(f(sharedQueueRequestsPerDeviceHour)) requests, \(f(sharedQueueBytesPerDeviceHour / 1000)) kB, no second parked poll
      """
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value) }
  }

  typealias Core = UpdateMachineCore<PresenceSnapshot, PresenceEvent, PresenceCommand>
  typealias Server = EventServerStateMachine<RecordingPresence>

  struct Device {
    var user: UserID
    var friend: UserID
    var core: Core
    var open = false
    var nextSwitch: Timestamp
    var recordingUntil: Timestamp?
    var nextRenewal: Timestamp?
    var nextRecording: Timestamp?
    /// The poll parked on the server, with the core's request id.
    var parked: (PollID, RequestID)?
  }

  /// Runs the scenario.
  public static func run(_ scenario: Scenario) -> Report {
    var world = PresenceWorld(scenario)
    world.run()
    return world.report()
  }
}

/// The presence world: devices' cores and the server's, moved second by second; a request is answered at
/// once (the costs are counts and bytes, not latencies).
struct PresenceWorld {
  typealias Device = PresenceSimulation.Device
  let scenario: PresenceSimulation.Scenario
  var random: SeededRandomNumberGenerator
  var server: PresenceSimulation.Server
  var devices: [Device] = []
  var now: Timestamp
  var nextPollID: UInt64 = 0
  var counts = (registers: 0, eventPolls: 0, emptyPolls: 0, writes: 0, bytes: 0, eventBytes: 0, writeBytes: 0)
  var parkedSeconds = 0
  var openSeconds = 0
  static let overhead = 150

  init(_ scenario: PresenceSimulation.Scenario) {
    self.scenario = scenario
    var random = SeededRandomNumberGenerator(seed: scenario.seed)
    let start = Timestamp(secondsSinceEpoch: 1_700_000_000)
    now = start
    server = PresenceSimulation.Server(
      application: RecordingPresence(),
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: start
    )
    for index in 0..<scenario.devices {
      let core = PresenceSimulation.Core(
        reducer: PresenceReducer(),
        configuration: PresenceReducer.configuration,
        lifecycle: .background,
        random: SeededRandomNumberGenerator(seed: random.next())
      )
      let closed = random.waitingTime(perHour: 60 / scenario.meanClosedMinutes) ?? .seconds(600)
      devices.append(
        Device(
          user: UserID(rawValue: "user\(index)"),
          friend: UserID(rawValue: "user\(index ^ 1)"),
          core: core,
          nextSwitch: start.advanced(by: closed)
        )
      )
    }
    self.random = random
    for index in devices.indices { perform(devices[index].core.loaded(nil, now: now), on: index) }
  }

  mutating func run() {
    let end = now.advanced(by: .seconds(Int64(scenario.hours * 3600)))
    while now < end {
      now = now.advanced(by: .seconds(1))
      if server.nextDeadline <= now { deliver(server.timerFired(now: now)) }
      for index in devices.indices {
        step(index)
        if devices[index].open { openSeconds += 1 }
        if devices[index].parked != nil { parkedSeconds += 1 }
      }
    }
  }

  /// One second of device `index`: its app opens or closes, its user records, its timers fire.
  mutating func step(_ index: Int) {
    if now >= devices[index].nextSwitch {
      devices[index].open.toggle()
      let mean = devices[index].open ? scenario.meanOpenMinutes : scenario.meanClosedMinutes
      devices[index].nextSwitch = now.advanced(by: random.waitingTime(perHour: 60 / mean) ?? .seconds(600))
      if devices[index].open {
        devices[index].nextRecording = now.advanced(
          by: random.waitingTime(perHour: scenario.recordingsPerOpenHour) ?? .seconds(3600)
        )
        perform(devices[index].core.enteredForeground(now: now), on: index)
      } else {
        if devices[index].recordingUntil != nil { stopRecording(index) }
        devices[index].nextRecording = nil
        perform(devices[index].core.enteredBackground(now: now), on: index)
      }
    }
    if let start = devices[index].nextRecording, now >= start, devices[index].recordingUntil == nil {
      let seconds = Int.random(in: scenario.recordingSeconds, using: &random)
      devices[index].recordingUntil = now.advanced(by: .seconds(Int64(seconds)))
      devices[index].nextRenewal = now.advanced(by: scenario.renewEvery)
      devices[index].nextRecording = now.advanced(
        by: random.waitingTime(perHour: scenario.recordingsPerOpenHour) ?? .seconds(3600)
      )
      submit(.recording(to: devices[index].friend), on: index)
    }
    if let until = devices[index].recordingUntil {
      if now >= until {
        stopRecording(index)
      } else if let renewal = devices[index].nextRenewal, now >= renewal {
        devices[index].nextRenewal = now.advanced(by: scenario.renewEvery)
        submit(.recording(to: devices[index].friend), on: index)
      }
    }
    if let wake = devices[index].core.nextWakeUp(after: now.advanced(by: .seconds(-1))), wake <= now {
      perform(devices[index].core.timerFired(now: now), on: index)
    }
  }

  mutating func stopRecording(_ index: Int) {
    devices[index].recordingUntil = nil
    devices[index].nextRenewal = nil
    submit(.stopped(to: devices[index].friend), on: index)
  }

  mutating func submit(_ command: PresenceCommand, on index: Int) {
    perform(devices[index].core.submit(command, now: now).1, on: index)
  }

  /// Performs a device's actions; every request is answered at once (a long-poll parks).
  mutating func perform(_ initial: [PresenceSimulation.Core.Action], on index: Int) {
    var actions = initial
    var position = 0
    while position < actions.count {
      let action = actions[position]
      position += 1
      let user = devices[index].user
      switch action {
      case .persist(let record, _):
        actions += devices[index].core.persistSucceeded(record, now: now)
      case .register(let request, let eventTypes, let lifespan, let clientID):
        let (registration, serverActions) = server.register(
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID,
          now: now
        )
        counts.registers += 1
        counts.bytes += 2 * Self.overhead + 60 + Self.size(of: registration)
        actions += devices[index].core.registerSucceeded(request, registration, now: now)
        deliver(serverActions)
      case .poll(let request, let finger, let dontBlock, _):
        nextPollID += 1
        let pollID = PollID(nextPollID)
        counts.bytes += Self.overhead + 100
        devices[index].parked = (pollID, request)
        let serverActions = server.poll(
          pollID,
          queueID: finger.queueID,
          user: user,
          lastEventID: finger.lastEventID,
          dontBlock: dontBlock,
          now: now
        )
        deliver(serverActions)
      case .submit(let request, let body, _):
        counts.writes += 1
        let bytes = 2 * Self.overhead + Self.size(of: body) + 80
        counts.bytes += bytes
        counts.writeBytes += bytes
        do throws(EventAPIError) {
          let (outcomes, serverActions) = try server.applyMutations(body, from: user, now: now)
          actions += devices[index].core.submitAnswered(request, outcomes, now: now)
          deliver(serverActions)
        } catch {
          actions += devices[index].core.submitFailed(request, .api(error), now: now)
        }
      case .cancel(let request):
        if let (pollID, parkedRequest) = devices[index].parked, parkedRequest == request {
          devices[index].parked = nil
          deliver(server.pollCancelled(pollID, now: now))
        }
      case .fetch, .fetchFinished:
        break  // presence holds nothing in part
      }
    }
  }

  /// Routes the server's poll completions to the devices whose polls they end.
  mutating func deliver(_ serverActions: [PresenceSimulation.Server.Action]) {
    for case .completePoll(let pollID, let outcome) in serverActions {
      guard let index = devices.firstIndex(where: { $0.parked?.0 == pollID }), let request = devices[index].parked?.1
      else { continue }
      devices[index].parked = nil
      switch outcome {
      case .events(let events):
        let bytes = Self.overhead + Self.size(of: EventsReply(events: events, queueID: "q"))
        counts.bytes += bytes
        if events.contains(where: { if case .payload = $0.body { true } else { false } }) {
          counts.eventPolls += 1
          counts.eventBytes += bytes
        } else {
          counts.emptyPolls += 1
        }
        perform(devices[index].core.pollSucceeded(request, events, now: now), on: index)
      case .failed(let error):
        counts.bytes += Self.overhead + 80
        counts.emptyPolls += 1
        perform(devices[index].core.pollFailed(request, .api(error), now: now), on: index)
      case .cancelled:
        break
      }
    }
  }

  static func size(of value: some Encodable) -> Int {
    (try? WireFormat.encodeSuccess(value).count) ?? 0
  }

  func report() -> PresenceSimulation.Report {
    let deviceHours = Double(devices.count) * scenario.hours
    let requests = Double(counts.registers + counts.eventPolls + counts.emptyPolls + counts.writes)
    return PresenceSimulation.Report(
      deviceHours: deviceHours,
      openShare: Double(openSeconds) / (deviceHours * 3600),
      requestsPerDeviceHour: requests / deviceHours,
      bytesPerDeviceHour: Double(counts.bytes) / deviceHours,
      registersPerDeviceHour: Double(counts.registers) / deviceHours,
      eventPollsPerDeviceHour: Double(counts.eventPolls) / deviceHours,
      emptyPollsPerDeviceHour: Double(counts.emptyPolls) / deviceHours,
      writesPerDeviceHour: Double(counts.writes) / deviceHours,
      parkedSecondsPerDeviceHour: Double(parkedSeconds) / deviceHours,
      sharedQueueRequestsPerDeviceHour: Double(counts.writes + counts.eventPolls) / deviceHours,
      sharedQueueBytesPerDeviceHour: Double(counts.writeBytes + counts.eventBytes) / deviceHours
    )
  }
}
