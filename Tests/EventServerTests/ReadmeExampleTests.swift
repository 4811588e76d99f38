import EventProtocol
import EventServer
import Foundation
import Testing

// README-EXAMPLE-BEGIN
/// The application's event: someone said hello.
struct Greeting: EventPayload {
  static let knownEventTypes: Set<String> = ["greeting"]
  var eventType: String { "greeting" }
  var text: String
}

/// The application: everyone sees every greeting.
struct GreetingBoard: ServerApplication {
  var greetings: [String] = []
  let everyone: [UserID] = ["alice", "bob"]

  struct Snapshot: Codable, Sendable, Equatable { var greetings: [String] }

  func snapshot(for user: UserID) -> Snapshot { Snapshot(greetings: greetings) }

  mutating func handle(_ text: String, from user: UserID) throws(CommandRejection) -> [Delivery<Greeting>] {
    greetings.append(text)
    return [Delivery(to: everyone, event: Greeting(text: text))]
  }
}

func greet() async throws -> [EventEnvelope<Greeting>] {
  let server = EventServer(application: GreetingBoard())
  let registration = await server.register(user: "alice")  // snapshot + finger, atomically
  try await server.handle("hello from bob", from: "bob")
  return try await server.events(
    queueID: registration.queueID,
    user: "alice",
    lastEventID: registration.lastEventID
  )  // [{"id": 0, "type": "greeting", "text": "hello from bob"}]
}
// README-EXAMPLE-END

@Suite("README example")
struct ReadmeExampleTests {
  @Test("the README's example runs and does what its comment says")
  func exampleRuns() async throws {
    #expect(try await greet() == [EventEnvelope(id: 0, body: .payload(Greeting(text: "hello from bob")))])
  }

  @Test("the README shows exactly the example this file compiles")
  func readmeMatches() throws {
    let source = try String(contentsOfFile: #filePath, encoding: .utf8)
    let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md")
    let readmeText = try String(contentsOf: readme, encoding: .utf8)
    let begin = try #require(source.range(of: "// README-EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// README-EXAMPLE-END"))
    let example = String(source[begin.upperBound..<end.lowerBound])
    #expect(readmeText.contains(example))
  }
}
