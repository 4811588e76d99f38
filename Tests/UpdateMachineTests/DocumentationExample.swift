// The README example, compiled and run by DocumentationExampleTests; the docs show the lines between the markers.
// EXAMPLE-BEGIN
import EventProtocol  // the vocabulary: ids, events, wire format
import EventServer  // the in-process server (a real app talks HTTP instead)
import Foundation
import UpdateMachine  // the client engine

/// An event: someone said hello. Its fields go on the wire beside `id` and `type`.
struct Greeting: EventPayload {
  static let knownEventTypes: Set<String> = ["greeting"]
  var eventType: String { "greeting" }
  var text: String
}

/// The app's state, as a registration's snapshot carries it.
struct Greetings: Codable, Sendable, Equatable {
  var all: [String] = []
}

/// The server side: everyone sees every greeting. `Codable`, so a durable server can snapshot it.
struct GreetingBoard: ServerApplication, Codable {
  var greetings = Greetings()
  var everyone: [UserID] = ["alice", "bob"]

  func snapshot(for user: UserID) -> Greetings { greetings }

  mutating func handle(_ text: String, from user: UserID) throws(CommandRejection) -> [Delivery<Greeting>] {
    greetings.all.append(text)
    return [Delivery(to: everyone, event: Greeting(text: text))]
  }
}

/// The client side: how an event changes the state, and how a pending write looks meanwhile.
struct GreetingsReducer: UpdateReducer {
  var initialState: Greetings { Greetings() }

  func apply(_ event: Greeting, to state: inout Greetings) throws(ReducerError) {
    state.all.append(event.text)
  }

  func applyOptimistically(_ text: String, to state: inout Greetings) {
    state.all.append(text)
  }
}

/// An app embedding the engine: start it, observe it, tell it about the lifecycle and pushes, write, stop.
func runGreetingsApp(storeURL: URL) async -> Greetings? {
  let server = EventServer(application: GreetingBoard())
  let machine = UpdateMachine(
    reducer: GreetingsReducer(),
    transport: InProcessTransport(server: server, user: "alice"),
    store: FileStore(url: storeURL)
  )
  await machine.start()  // loads the file, then registers (or resumes polling)
  _ = await machine.submit("hello from alice")  // outbox: persisted, retried, applied once
  await machine.enteredBackground()  // no long-poll in the background
  await machine.pushReceived()  // a push hint: fetch at once
  await machine.enteredForeground()  // long-poll again

  var shown: Greetings?
  for await snapshot in await machine.snapshots() {
    shown = snapshot.state  // confirmed state plus pending writes
    if snapshot.pendingMutations.isEmpty, snapshot.freshness.freshness == .live { break }
  }
  await machine.stop()
  return shown
}
// EXAMPLE-END
