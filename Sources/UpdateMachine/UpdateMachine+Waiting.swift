import EventProtocol

/// Waiting for the machine, without polling ``UpdateMachine/snapshot``: for command-line tools, tests and
/// app start-up code that must not go on before the data is current.
///
/// ```swift
/// await machine.start()
/// guard let live = await machine.waitUntilLive(), live.stopReason == nil else { return }
/// _ = await machine.submit(.post("hello", to: ["bob"]))
/// let settled = await machine.waitUntilSettled()   // the write is confirmed and shown
/// ```
extension UpdateMachine {
  /// The first snapshot, from the current one on, that satisfies `condition`.
  /// - Returns: That snapshot, or `nil` when the machine was stopped with ``stop()`` first.
  public func firstSnapshot(where condition: @Sendable (Snapshot) -> Bool) async -> Snapshot? {
    for await snapshot in snapshots() where condition(snapshot) {
      return snapshot
    }
    return nil
  }

  /// Waits until the server has answered since the last disconnection (freshness `.live`), or the machine
  /// stopped for a reason it cannot fix alone (``UpdateMachineSnapshot/stopReason``: check it).
  /// - Returns: That snapshot, or `nil` when the machine was stopped with ``stop()`` first.
  public func waitUntilLive() async -> Snapshot? {
    await firstSnapshot { $0.freshness.freshness == .live || $0.stopReason != nil }
  }

  /// Waits until the machine is live with nothing left to send or confirm (every write submitted so far
  /// is applied and shown in the confirmed state), or stopped for a reason it cannot fix alone.
  /// - Returns: That snapshot, or `nil` when the machine was stopped with ``stop()`` first.
  public func waitUntilSettled() async -> Snapshot? {
    await firstSnapshot {
      ($0.freshness.freshness == .live && $0.pendingMutations.isEmpty) || $0.stopReason != nil
    }
  }
}
