import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachine

/// One machine per store: a second user of the file, in another process or this one, is refused before it
/// reads or writes anything (two engines on one record would take each other's mutation ids).
@Suite("FileStore: one machine per file", .hangGuard)
struct StoreLockTests {
  @Test("a second machine on the same file stops as storeInUse, reads nothing; once the first stops, a new one runs")
  func secondMachineRefused() async throws {
    let world = World()
    defer { try? FileManager.default.removeItem(at: world.storeURL) }
    let first = await world.startLiveMachine()
    _ = await first.submit(.post("from the first", to: ["alice"]))
    await waitFor(first) { $0.pendingMutations.isEmpty && $0.state?.notes == ["from the first"] }
    let second = world.makeMachine()
    await second.start()
    let refused = await waitFor(second) { $0.stopReason != nil }
    guard case .storeInUse(let detail)? = refused?.stopReason else {
      Issue.record("the second machine was not refused: \(String(describing: refused?.stopReason))")
      return
    }
    #expect(detail.contains(".lock"))
    #expect(refused?.state == nil)
    #expect(refused?.metrics.registers == 0 && refused?.metrics.submits == 0)
    await second.resume()
    #expect(await second.snapshot.stopReason == refused?.stopReason)
    await second.stop()
    await first.stop()
    // The first gave the file back: a new machine reads what it saved and goes on.
    let third = await world.startLiveMachine()
    #expect(await third.snapshot.state?.notes == ["from the first"])
    await third.stop()
  }

  @Test("a lock file that cannot be created is a write failure, not 'in use'; resume() tries again and goes on")
  func uncreatableLockIsAWriteFailure() async throws {
    let world = World()
    let lockURL = world.storeURL.appendingPathExtension("lock")
    defer {
      try? FileManager.default.removeItem(at: world.storeURL)
      try? FileManager.default.removeItem(at: lockURL)
    }
    // A folder where the lock file should be: open(2) cannot create it (EISDIR), as in a read-only folder
    // (this runs as any user, root included, which a read-only folder would not stop).
    try FileManager.default.createDirectory(at: lockURL, withIntermediateDirectories: false)
    let machine = world.makeMachine()
    await machine.start()
    let failed = await waitFor(machine) { $0.persistenceIssue != nil }
    #expect(failed?.stopReason == nil)
    #expect(failed?.persistenceIssue?.isSameKind(as: .writeFailed("")) == true)
    #expect(failed?.persistenceIssue?.detail.contains(".lock") == true)
    #expect(await machine.submit(.post("not kept", to: ["alice"])) == MutationID(0))
    try FileManager.default.removeItem(at: lockURL)
    await machine.resume()
    let live = await waitFor(machine) { $0.persistenceIssue == nil && $0.freshness.freshness == .live }
    #expect(live?.stopReason == nil)
    await machine.stop()
  }

  @Test("a load removes Foundation's atomic-write temporaries older builds left, and keeps fresh ones")
  func foreignTemporariesRemoved() throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("nosync-\(UUID())")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let old = folder.appendingPathComponent(".dat.nosync3f1.Ab12Cd")
    let fresh = folder.appendingPathComponent(".dat.nosync3f2.Ef34Gh")
    for url in [old, fresh] { _ = FileManager.default.createFile(atPath: url.path, contents: Data("x".utf8)) }
    try FileManager.default.setAttributes(
      [.modificationDate: Date().addingTimeInterval(-3_600)],
      ofItemAtPath: old.path
    )
    let store = FileStore(url: folder.appendingPathComponent("record.json"))
    _ = try store.load()
    #expect(!FileManager.default.fileExists(atPath: old.path))
    #expect(FileManager.default.fileExists(atPath: fresh.path))
  }

  @Test("another process holding the file: the store refuses with inUse; the lock goes with the process")
  func anotherProcess() throws {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("locked-\(UUID()).json")
    defer {
      try? FileManager.default.removeItem(at: url)
      try? FileManager.default.removeItem(at: url.appendingPathExtension("lock"))
    }
    let store = FileStore(url: url)
    try store.save(Data("kept".utf8))
    _ = FileManager.default.createFile(atPath: store.lockURL.path, contents: nil)
    // Another process takes the same advisory lock (util-linux flock on its descriptor 9), says so, and
    // becomes `sleep` holding it, until we kill it by its pid.
    let holder = Process()
    holder.executableURL = URL(fileURLWithPath: "/bin/sh")
    holder.arguments = ["-c", #"exec 9>"$0"; flock --exclusive 9; echo held; exec sleep 30"#, store.lockURL.path]
    let output = Pipe()
    holder.standardOutput = output
    try holder.run()
    defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL) } }
    // Wait until it says it holds the lock (it prints once flock succeeded).
    _ = output.fileHandleForReading.availableData
    do {
      try store.open()
      Issue.record("a file another process holds was opened")
    } catch {
      #expect(error.isSameKind(as: .inUse("")))
    }
    #expect(try store.load() == Data("kept".utf8))
    kill(holder.processIdentifier, SIGKILL)
    holder.waitUntilExit()
    try store.open()
    store.close()
  }
}

@Suite("Waiting for the machine", .hangGuard)
struct WaitingTests {
  @Test(
    "waitUntilLive and waitUntilSettled return once live and once the write is confirmed; a stopped machine returns"
  )
  func waits() async throws {
    let world = World()
    defer { try? FileManager.default.removeItem(at: world.storeURL) }
    let machine = world.makeMachine()
    await machine.start()
    let live = await machine.waitUntilLive()
    #expect(live?.freshness.freshness == .live)
    _ = await machine.submit(.post("hi", to: ["alice"]))
    let settled = await machine.waitUntilSettled()
    #expect(settled?.pendingMutations.isEmpty == true)
    #expect(settled?.confirmedState?.notes == ["hi"])
    // A machine refused its store stops: waiting returns the stop instead of hanging.
    let other = world.makeMachine()
    await other.start()
    let refused = await other.waitUntilLive()
    #expect(refused?.stopReason != nil)
    await other.stop()
    #expect(await other.waitUntilSettled() == nil)
    await machine.stop()
  }
}
