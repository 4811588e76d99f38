import EventServer
import Foundation
import NIOSSL
import PostgresNIO

/// A `postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require]` URL, read into a
/// client configuration. TLS is preferred unless the host is loopback; `sslmode` says otherwise.
struct PostgresURL {
  var configuration: PostgresClient.Configuration
  /// `host:port/database` as user@…, without the password.
  var location: String

  init(_ text: String) throws(ServerLogError) {
    guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? ""),
      let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
    else {
      throw .storage("'\(Self.redacted(text))' is not a postgres://user[:password]@host[:port]/database URL")
    }
    let port = components.port ?? 5432
    let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
    let mode = components.queryItems?.first { $0.name == "sslmode" }?.value
    let isLoopback = ["127.0.0.1", "::1", "localhost"].contains(host)
    let tls: PostgresClient.Configuration.TLS
    switch mode ?? (isLoopback ? "disable" : "prefer") {
    case "disable": tls = .disable
    case "prefer": tls = .prefer(.makeClientConfiguration())
    case "require", "verify-full": tls = .require(.makeClientConfiguration())
    case let other:
      throw .storage("sslmode must be disable, prefer or require, not '\(other)'")
    }
    configuration = PostgresClient.Configuration(
      host: host,
      port: port,
      username: user.removingPercentEncoding ?? user,
      password: components.password?.removingPercentEncoding,
      database: database.isEmpty ? nil : database,
      tls: tls
    )
    location = "postgres://\(user)@\(host):\(port)/\(database)"
  }

  /// The URL without its password, for messages.
  static func redacted(_ text: String) -> String {
    guard var components = URLComponents(string: text), components.password != nil else { return text }
    components.password = "…"
    return components.string ?? "the URL"
  }
}
