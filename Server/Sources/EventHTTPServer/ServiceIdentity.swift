import EventProtocol

/// A backend's identity: a service key (not a user's) that submits writes on users' behalf through
/// `POST /api/v1/service/mutation_batches?user=U`, or as itself without `user` (a publish): the writes are
/// then the user `service:<name>`'s (``user(of:)``), and the application decides whom their events reach,
/// as for any write (an application that takes no writes from services refuses them in its `handle`).
///
/// Service keys are their own table (an ``APIKeys`` whose names are services): a service key proves nothing
/// on the users' routes, and a user's key nothing on the service route. Every write a service makes is
/// recorded in the input log under the client id `service:<name>` (``clientID(of:)``), which no user's
/// client may use, so the log names the service that made each write, and a retry with the same mutation id
/// is applied once, as any client's is.
///
/// ```swift
/// configuration.serviceKeys = try APIKeys(["billing": "billing-service-key"])
/// // POST /api/v1/service/mutation_batches?user=alice, Basic billing:billing-service-key,
/// // {"mutations": [{"client_id": "service:billing", "mutation_id": 41, "mutation": …}]}
/// ```
public enum ServiceIdentity {
  /// The prefix of the client ids reserved for services.
  public static let clientIDPrefix = "service:"

  /// The client id the writes of `service` are recorded under.
  public static func clientID(of service: UserID) -> ClientID {
    ClientID(rawValue: clientIDPrefix + service.rawValue)
  }

  /// The user a service's own writes (its publishes) are from: `service:<name>`, a name no user can have
  /// (``APIKeys`` refuses `:` in names, and a token naming such a user proves nobody).
  public static func user(of service: UserID) -> UserID {
    UserID(clientIDPrefix + service.rawValue)
  }

  /// Whether `user` is a service's own identity (``user(of:)``).
  public static func isService(_ user: UserID) -> Bool {
    user.rawValue.hasPrefix(clientIDPrefix)
  }

  /// Whether `clientID` is reserved for a service (a user's client sending it is refused `400`).
  public static func isReserved(_ clientID: ClientID) -> Bool {
    clientID.rawValue.hasPrefix(clientIDPrefix)
  }

  /// The refusal of a user's write under a reserved client id.
  static let reservedClientID = EventAPIError.badRequest(
    "client ids starting with '\(clientIDPrefix)' are reserved for services' writes"
  )
}
