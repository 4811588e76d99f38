import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing

@testable import UpdateMachine

@Suite("URLSessionTransport: batches of writes", .hangGuard)
struct TransportBatchTests {
  private typealias Transport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>

  private func batch(_ count: Int, text: String = "n") -> MutationBatch<NoteBoard.Command> {
    MutationBatch(
      requests: (1...count).map {
        MutationRequest(clientID: "c1", mutationID: MutationID(UInt64($0)), mutation: .post("\(text)\($0)", to: []))
      }
    )
  }

  @Test("a server without the batch route (404) gets the first write alone, and every later one alone")
  func fallsBackToSingleWrites() async throws {
    let receipt = #"{"result":"success","msg":"","applied":true,"events_through":{}}"#
    let server = try CannedHTTPServer { head in
      let body =
        head.hasPrefix("POST /api/v1/mutations ") ? receipt : #"{"result":"error","code":"BAD_REQUEST","msg":"no"}"#
      let status = head.hasPrefix("POST /api/v1/mutations ") ? "200 OK" : "404 Not Found"
      return "HTTP/1.1 \(status)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    }
    defer { server.stop() }
    let transport = Transport(baseURL: server.url, credentials: .init(user: "alice", apiKey: "k3y"))
    let first = try await transport.submit(batch(3), queueID: nil)
    #expect(first == [.acknowledged(MutationID(1), MutationReceipt(applied: true, eventsThrough: [:]))])
    _ = try await transport.submit(batch(3), queueID: nil)
    let lines = server.requests.map { $0.components(separatedBy: "\r\n")[0] }
    #expect(
      lines == [
        "POST /api/v1/mutation_batches HTTP/1.1", "POST /api/v1/mutations HTTP/1.1", "POST /api/v1/mutations HTTP/1.1",
      ]
    )
  }

  @Test("a batch over the byte limit sends the writes that fit, at least one, as a body the server decodes")
  func cutToTheByteLimit() throws {
    let writes = batch(10, text: String(repeating: "x", count: 40))
    let (body, count) = try Transport.batchBody(writes.requests, limit: 400)
    #expect((1..<10).contains(count))
    #expect(body.count <= 400)
    let decoded = try JSONDecoder().decode(MutationBatch<NoteBoard.Command>.self, from: body)
    #expect(decoded.requests == Array(writes.requests.prefix(count)))
    let (whole, all) = try Transport.batchBody(writes.requests, limit: 1 << 20)
    #expect(all == 10)
    #expect(try JSONDecoder().decode(MutationBatch<NoteBoard.Command>.self, from: whole) == writes)
    // One write over the limit still goes alone: the server says whether it is too large.
    #expect(try Transport.batchBody(writes.requests, limit: 10).1 == 1)
  }
}
