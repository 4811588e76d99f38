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

// TOKEN-EXAMPLE-BEGIN
/// The app's session with the team's identity provider (OAuth 2.0, OpenID Connect).
protocol IdentitySession: Sendable {
  /// The access token held, refreshed ahead of its expiry.
  func accessToken() async throws -> String
  /// A new access token, after the server refused the one held.
  func refreshedAccessToken() async throws -> String
}

/// The greetings app sending the identity provider's access token, refreshed once when the server refuses it.
func makeSignedInApp(
  server: URL,
  session: some IdentitySession,
  storeURL: URL
) -> UpdateMachine<Greetings, Greeting, String> {
  let credentials = CredentialsProvider { request in
    switch request {
    case .current: .bearer(try await session.accessToken())
    case .refresh: .bearer(try await session.refreshedAccessToken())
    }
  }
  return UpdateMachine(
    reducer: GreetingsReducer(),
    transport: URLSessionTransport(baseURL: server, credentials: credentials),
    store: FileStore(url: storeURL)
  )
}
// TOKEN-EXAMPLE-END
