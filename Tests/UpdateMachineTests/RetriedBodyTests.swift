import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing

@testable import UpdateMachine

/// The write that stalled for 30 s: when a server closes a reused keep-alive connection just as a request is
/// sent on it, libcurl retries the request on a fresh connection and asks FoundationNetworking to rewind the
/// body; for an `httpBody` FoundationNetworking answers "rewound" without rewinding, so the retry announced
/// `Content-Length` and sent no body, and the server waited for it until the request's deadline.
@Suite("URLSessionTransport: a request retried on a fresh connection sends its body again", .hangGuard)
struct RetriedBodyTests {
  @Test("a mutation whose keep-alive connection is dropped is sent whole on the next connection")
  func mutationRetriedWithItsBody() async throws {
    let server = try ReusedConnectionServer(
      answer: #"{"result":"success","msg":"","applied":true,"events_through":{}}"#
    )
    defer { server.stop() }
    let transport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
      baseURL: server.url,
      credentials: .init(user: "alice", apiKey: "k3y")
    )
    for id in 1...6 {
      let request = MutationRequest<NoteBoard.Command>(
        clientID: "c1",
        mutationID: MutationID(UInt64(id)),
        mutation: .post("n\(id)", to: [])
      )
      let receipt = try await transport.submit(request, queueID: nil)
      #expect(receipt.applied)
    }
    let received = server.received
    // Every second request met a dropped connection, so the six mutations took nine requests…
    #expect(received.filter(\.onReusedConnection).count >= 3)
    // …and every one of them carried its whole body.
    #expect(received.allSatisfy { $0.arrived == $0.announced && $0.announced > 0 }, "\(received)")
  }
}
