import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing

@testable import TokenAuthentication

/// Tenants from the token: the user's id is `tenant/user`, the team checklist's partition key, so a token
/// can only ever name a user of its own tenant, and that user reads and changes only their tenant's data.
@Suite("Tenants come from the token and never cross", .serialized, .hangGuard)
struct TenantTokenTests {
  private let policy = try! TokenPolicy(
    issuer: TestIdentityProvider.issuer,
    audiences: [TestIdentityProvider.audience],
    tenantClaim: "org"
  )

  @Test("the tenant claim prefixes the user; a token without one, or with a `/` in it, proves nobody")
  func tenantClaim() {
    let now = Timestamp(secondsSinceEpoch: 1_800_000_000)
    var claims = TestIdentityProvider.claims(for: "alice", now: now)
    claims.strings["org"] = "acme"
    #expect(policy.check(claims, now: now) == .user("acme/alice"))
    claims.strings["sub"] = "globex/alice"
    #expect(policy.check(claims, now: now) == .user("acme/globex/alice"), "the tenant is the token's, not the sub's")
    #expect(UserID("acme/globex/alice").team == "acme")
    claims.strings["org"] = "acme/globex"
    #expect(policy.check(claims, now: now) == .refused(.tokenClaimMissing("org")))
    claims.strings["org"] = nil
    #expect(policy.check(claims, now: now) == .refused(.tokenClaimMissing("org")))
    #expect(throws: TokenPolicyError.self) {
      try TokenPolicy(issuer: "https://id.test/", audiences: ["a"], userClaim: "sub", tenantClaim: "sub")
    }
  }

  @Test(
    "two tenants' users of one name: each sees and changes only their tenant's checklist, and not the other's queue",
    arguments: StoredBackend.available
  )
  func tenantsApart(_ backend: StoredBackend) async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    let clock = TestNow()
    let tokens = JWTAuthenticator(keys: provider.source, policy: policy, now: clock.closure)
    func user(org: String, sub: String) async throws -> UserID {
      var claims = TestIdentityProvider.claims(for: sub, now: clock.now)
      claims.strings["org"] = org
      let token = try await provider.token(claims, keyID: "ec-1")
      return try #require(await tokens.verdict(authorization: "Bearer \(token)").user)
    }
    let acme = try await user(org: "acme", sub: "alice")
    let globex = try await user(org: "globex", sub: "alice")
    // A globex token whose sub names an acme user is a globex user all the same.
    let sneaky = try await user(org: "globex", sub: "acme/alice")
    #expect([acme, globex, sneaky] == ["acme/alice", "globex/alice", "globex/acme/alice"])

    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(TeamChecklist(), from: log, clock: ContinuousClock()).0
    var next: UInt64 = 0
    func write(_ command: ChecklistCommand, as user: UserID) async throws {
      next += 1
      _ = try await server.applyMutation(.request(command), from: user, clientID: "phone", mutationID: MutationID(next))
    }
    for member in [acme, globex, sneaky] { try await write(.join, as: member) }
    let acmeQueue = try await server.register(user: acme)
    try await write(.add(title: "acme's plan"), as: acme)
    let acmeItems = try await server.readStoredState { try await TeamChecklist.checklist(of: "acme", in: $0) }
    let item = try #require(acmeItems.items.first?.id)

    for outsider in [globex, sneaky] {
      let seen = try await server.register(user: outsider)
      #expect(seen.snapshot?.items.isEmpty == true, "\(outsider) sees no acme item")
      await #expect(throws: EventAPIError.self, "\(outsider) cannot check acme's item") {
        try await server.applyMutation(
          .request(.check(item: item, done: true)),
          from: outsider,
          clientID: "phone",
          mutationID: MutationID(100)
        )
      }
      await #expect(throws: EventAPIError.badEventQueueID(acmeQueue.queueID), "\(outsider) cannot read acme's queue") {
        _ = try await server.events(queueID: acmeQueue.queueID, user: outsider, lastEventID: -1, dontBlock: true)
      }
    }
    let after = try await server.readStoredState { try await TeamChecklist.checklist(of: "acme", in: $0) }
    #expect(after.items == acmeItems.items, "acme's item unchanged")
    let globexItems = try await server.readStoredState { try await TeamChecklist.checklist(of: "globex", in: $0) }
    #expect(globexItems.items.isEmpty)

    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }
}
