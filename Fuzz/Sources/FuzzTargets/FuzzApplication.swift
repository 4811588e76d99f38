import EventProtocol
import EventServer
import UpdateMachine

/// A small application for the fuzz targets: each user's list of texts; a command posts a text to users.
struct FuzzBoard: ServerApplication, Equatable, Codable {
  var texts: [UserID: [String]] = [:]

  enum Command: Codable, Sendable, Equatable {
    case post(String, to: [UserID])
    case refuse
  }

  func snapshot(for user: UserID) -> FuzzState { FuzzState(texts: texts[user] ?? []) }

  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<FuzzEvent>] {
    switch command {
    case .post(let text, let recipients):
      for recipient in Set(recipients) { texts[recipient, default: []].append(text) }
      return [Delivery(to: recipients, event: FuzzEvent(text: text))]
    case .refuse:
      throw CommandRejection("refused")
    }
  }
}

struct FuzzState: Codable, Sendable, Equatable {
  var texts: [String]
}

struct FuzzEvent: EventPayload {
  static let knownEventTypes: Set<String> = ["text"]
  var eventType: String { "text" }
  var text: String
}

struct FuzzReducer: UpdateReducer {
  var initialState: FuzzState { FuzzState(texts: []) }

  func apply(_ event: FuzzEvent, to state: inout FuzzState) throws(ReducerError) {
    if event.text == "poison" { throw ReducerError("poison") }
    state.texts.append(event.text)
  }

  func applyOptimistically(_ mutation: FuzzBoard.Command, to state: inout FuzzState) {
    if case .post(let text, _) = mutation { state.texts.append(text) }
  }
}

typealias FuzzCore = UpdateMachineCore<FuzzState, FuzzEvent, FuzzBoard.Command>
typealias FuzzServer = EventServerStateMachine<FuzzBoard>

let fuzzStart = Timestamp(secondsSinceEpoch: 1_700_000_000)

/// Reads the fuzzer's bytes as a stream of small numbers.
struct ByteReader {
  var bytes: ArraySlice<UInt8>

  var isEmpty: Bool { bytes.isEmpty }

  mutating func next() -> UInt8 {
    bytes.popFirst() ?? 0
  }

  mutating func nextSeed() -> UInt64 {
    var seed: UInt64 = 0
    for _ in 0..<8 { seed = (seed << 8) | UInt64(next()) }
    return seed
  }
}
