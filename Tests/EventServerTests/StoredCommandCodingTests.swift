import EventProtocol
import EventServer
import Foundation
import SampleApps
import Testing

@Suite("A stored application's decisions in the log: replayed exactly, and a request digests as the bare command")
struct StoredCommandCodingTests {
  typealias Command = StoredCommand<NoteBoard.Command, NoteEvent>

  @Test("each decision survives the log's codec unchanged (events keep their type)")
  func roundTrip() throws {
    let decisions: [Command] = [
      .delivered([Delivery(to: ["alice", "bob"], event: .note(text: "hi")), Delivery(to: ["carol"], event: .ping)]),
      .delivered([]),
      .rejected("bob may not do that"),
      .request(.post("hello", to: ["alice"])),
    ]
    for decision in decisions {
      let entry = ServerLogEntry(
        time: Timestamp(secondsSinceEpoch: 1_000),
        input: ServerInput<Command>.deadlineDecided(command: decision)
      )
      let bytes = try ServerLogCodec.encode(entry)
      let reading: ServerLogCodec.Reading<Command> = try ServerLogCodec.decode(bytes, at: 1)
      guard case .entry(let read) = reading, case .deadlineDecided(let command) = read.input
      else {
        Issue.record("\(decision) did not read back")
        continue
      }
      #expect(command == decision)
    }
  }

  @Test("a request is the application's command on the wire: same bytes, same digest")
  func requestIsTheCommand() throws {
    let command = NoteBoard.Command.post("hello", to: ["alice"])
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    #expect(try encoder.encode(Command.request(command)) == encoder.encode(command))
    #expect(MutationDigest.measuring(Command.request(command)).0 == MutationDigest.measuring(command).0)
    let decoded = try JSONDecoder().decode(Command.self, from: JSONEncoder().encode(command))
    #expect(decoded == .request(command))
  }
}
