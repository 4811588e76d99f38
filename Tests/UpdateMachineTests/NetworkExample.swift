import EventProtocol
import Foundation
import UpdateMachine

// NETWORK-EXAMPLE-BEGIN
/// The greetings app against a real event server over HTTP (Server/README.md runs one).
func makeNetworkedApp(server: URL, apiKey: String, storeURL: URL) -> UpdateMachine<Greetings, Greeting, String> {
  UpdateMachine(
    reducer: GreetingsReducer(),
    transport: URLSessionTransport(baseURL: server, credentials: .init(user: "alice", apiKey: apiKey)),
    store: FileStore(url: storeURL)
  )
}
// NETWORK-EXAMPLE-END
