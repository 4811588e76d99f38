import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

typealias ChatWorld = LoopbackWorld<ChatChannels, ChatReducer>

/// Fetched pages and events compose exactly once, whatever the interleaving: the chat sample app's devices
/// fetch channels at any anchor and size while writes, server commands, lost answers, crashes, restarts,
/// expired queues and pushes go on; after every step, every known message must equal the server's message
/// at the device's finger, and every interval of completeness must be true of the server's list there.
/// Serialized, like every long synchronous property test: run in parallel they take every thread of the
/// cooperative pool and starve the asynchronous tests beside them past their time limits.
@Suite("Partial state: pages and events compose exactly once", .serialized)
struct PartialStatePropertyTests {
  static let channels = ["general", "random", "dev"]

  @Test(
    "every known item equals the server's at the finger, every interval is true, own writes show once",
    .cpuBound,
    arguments: TestSeeds.first(40, of: 120) as Range<UInt64>
  )
  func composition(seed: UInt64) {
    var world = ChatWorld(
      application: ChatChannels(members: ["alice", "bob"]),
      reducer: { _ in ChatReducer() },
      devices: ["alice", "alice", "bob"],
      seed: seed
    )
    var random = SeededRandomNumberGenerator(seed: seed &+ 7_919)
    var texts = 0
    var postedOn: [String: (device: Int, queue: QueueID?)] = [:]
    for step in 0..<350 {
      Self.act(on: &world, random: &random, texts: &texts, postedOn: &postedOn)
      let problems = Self.problems(in: world, postedOn: postedOn)
      guard problems.isEmpty else {
        Issue.record("seed \(seed), step \(step): \(problems)\n\(world.trace.suffix(30).joined(separator: "\n"))")
        try? world.trace.joined(separator: "\n").write(
          toFile: "/tmp/partial-trace-\(seed).txt",
          atomically: true,
          encoding: .utf8
        )
        return
      }
    }
    let settled = world.runUntilSettled(maximumSteps: 20_000)
    #expect(settled, "seed \(seed) did not settle")
    #expect(Self.problems(in: world, postedOn: postedOn).isEmpty)
  }

  /// One random step: the world's own chaos, a write from a device, a command on the server, or a fetch.
  static func act(
    on world: inout ChatWorld,
    random: inout SeededRandomNumberGenerator,
    texts: inout Int,
    postedOn: inout [String: (device: Int, queue: QueueID?)]
  ) {
    let highestID = max(1, world.server.application.version + 1)
    func command() -> ChatCommand {
      let id = Int.random(in: 1...highestID, using: &random)
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<4:
        texts += 1
        return .post(channel: channels.randomElement(using: &random)!, text: "m\(texts)")
      case 4: return .edit(id, text: "edit \(Int.random(in: 0..<1_000, using: &random))")
      case 5, 6: return .react(id)
      case 7, 8: return .move(id, to: channels.randomElement(using: &random)!)
      default: return .delete(id)
      }
    }
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<50:
      world.chaoticStep()
    case 50..<62:
      let device = Int.random(in: world.devices.indices, using: &random)
      let write = command()
      if case .post(_, let text) = write { postedOn[text] = (device, world.devices[device].core.phase.finger?.queueID) }
      world.submit(write, on: device)
    case 62..<72:
      _ = try? world.serverCommand(command(), from: "carol")
    default:
      let device = Int.random(in: world.devices.indices, using: &random)
      let narrow =
        Bool.random(using: &random)
        ? Narrow([NarrowTerm("channel", channels.randomElement(using: &random)!)]) : Narrow([])
      let anchor: FetchAnchor =
        switch Int.random(in: 0..<3, using: &random) {
        case 0: .oldest
        case 1: .newest
        default: .position(Int.random(in: 0...highestID + 1, using: &random))
        }
      let request = FetchRequest(
        narrow: narrow,
        anchor: anchor,
        before: Int.random(in: 0...4, using: &random),
        after: Int.random(in: 0...4, using: &random)
      )
      world.fetch(request, on: device)
    }
  }

  /// What is wrong on any device: a known message or an interval untrue of the server at the device's
  /// finger (the server's messages at each version are in its history), or an own write shown twice.
  static func problems(in world: ChatWorld, postedOn: [String: (device: Int, queue: QueueID?)]) -> [String] {
    var problems: [String] = []
    let server = world.server.application
    for (index, device) in world.devices.enumerated() {
      guard let state = device.core.confirmedState else { continue }
      let version = state.chat.version
      guard version < server.history.count else {
        problems.append("device \(index) is at version \(version), past the server's \(server.version)")
        continue
      }
      let found = PartialStateCheck.problems(in: state.messages) { request in
        FetchPage.select(server.list(request.narrow, at: version), request: request, position: \.id)
      }
      problems += found.map { "device \(index) at version \(version): \($0)" }
      // An own write pending in the outbox is never also shown as a known message, while the queue it was
      // sent on lives (a write the server applied before a re-registration is retired by its resend).
      let known = Set(state.messages.known.values.map(\.text))
      for entry in device.core.pendingMutations {
        guard case .post(_, let text) = entry.mutation, known.contains(text),
          let posted = postedOn[text], posted.device == index, let queue = posted.queue,
          queue == device.core.phase.finger?.queueID
        else { continue }
        problems.append("device \(index) shows its own post \(text) twice: pending and known")
      }
    }
    return problems
  }
}
