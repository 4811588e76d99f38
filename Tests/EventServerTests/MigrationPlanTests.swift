import EventServer
import Testing

@Suite("Migration plans: what a database needs, or a refusal that changes nothing")
struct MigrationPlanTests {
  let list = [
    SchemaMigration(version: 1, name: "notes", sqlite: ["A"], postgres: ["A"]),
    SchemaMigration(version: 2, name: "notes.pinned", sqlite: ["B"], postgres: ["B"]),
    SchemaMigration(version: 3, name: "tags", sqlite: ["C"], postgres: ["C"]),
  ]

  @Test("a fresh database needs every migration; a current one none; one behind the rest, in order")
  func pending() throws {
    #expect(try MigrationPlan.pending(list, applied: []).map(\.version) == [1, 2, 3])
    let one = [AppliedMigration(version: 1, name: "notes")]
    #expect(try MigrationPlan.pending(list, applied: one).map(\.version) == [2, 3])
    let all = list.map { AppliedMigration(version: $0.version, name: $0.name) }.reversed()
    #expect(try MigrationPlan.pending(list, applied: Array(all)).isEmpty)
  }

  @Test("a database newer than the build, a name changed at a version, a recorded gap: refused by kind")
  func refusals() {
    let newer = [
      AppliedMigration(version: 1, name: "notes"), AppliedMigration(version: 2, name: "notes.pinned"),
      AppliedMigration(version: 3, name: "tags"), AppliedMigration(version: 4, name: "future"),
    ]
    #expect(kind(of: { try MigrationPlan.pending(list, applied: newer) }) == .newerDatabase)
    let edited = [AppliedMigration(version: 1, name: "notes"), AppliedMigration(version: 2, name: "pins")]
    #expect(kind(of: { try MigrationPlan.pending(list, applied: edited) }) == .mismatch)
    let gap = [AppliedMigration(version: 2, name: "notes.pinned")]
    #expect(kind(of: { try MigrationPlan.pending(list, applied: gap) }) == .mismatch)
  }

  @Test("docs/upgrading.md's list of migrations compiles, plans from a fresh database, and is shown as it is")
  func documentedList() throws {
    // MIGRATIONS-BEGIN
    let migrations = [
      SchemaMigration(
        version: 1,
        name: "notes",
        sqlite: ["CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, text TEXT NOT NULL)"],
        postgres: ["CREATE TABLE notes (id bigserial PRIMARY KEY, owner text NOT NULL, text text NOT NULL)"]
      ),
      SchemaMigration(
        version: 2,
        name: "notes.pinned",
        sqlite: ["ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"],
        postgres: ["ALTER TABLE notes ADD COLUMN pinned boolean NOT NULL DEFAULT false"]
      ),
    ]
    // MIGRATIONS-END
    #expect(try MigrationPlan.pending(migrations, applied: []).map(\.name) == ["notes", "notes.pinned"])
    try expectDocumented("MIGRATIONS", from: #filePath, in: "docs/upgrading.md", indent: 4)
  }

  @Test("a list whose versions skip, repeat or start elsewhere, or with an empty name, is refused")
  func invalidLists() {
    var skipping = list
    skipping[2].version = 4
    #expect(kind(of: { try MigrationPlan.pending(skipping, applied: []) }) == .invalidList)
    var repeating = list
    repeating[1].version = 1
    #expect(kind(of: { try MigrationPlan.pending(repeating, applied: []) }) == .invalidList)
    var unnamed = list
    unnamed[0].name = ""
    #expect(kind(of: { try MigrationPlan.pending(unnamed, applied: []) }) == .invalidList)
  }

  private func kind(of body: () throws -> [SchemaMigration]) -> MigrationError.Kind? {
    do {
      _ = try body()
      return nil
    } catch {
      return (error as? MigrationError)?.kind
    }
  }
}
