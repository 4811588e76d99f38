import EventProtocol
import Observation

/// An `@Observable` view of an ``UpdateMachine`` for SwiftUI-style apps: its ``snapshot`` follows the
/// machine's snapshot stream on the main actor.
///
/// ```swift
/// @State var model = UpdateMachineModel(machine: machine)
/// var body: some View {
///   List(model.snapshot?.state?.videos ?? []) { VideoRow($0) }
///     .overlay { if case .cannotConnect = model.snapshot?.freshness.freshness { OfflineBanner() } }
/// }
/// ```
@MainActor
@Observable
public final class UpdateMachineModel<
  State: Codable & Sendable & Equatable,
  Event: EventPayload,
  Mutation: Codable & Sendable & Equatable
> {
  /// The latest snapshot; `nil` until the first arrives.
  public private(set) var snapshot: UpdateMachineSnapshot<State, Mutation>?
  /// How many snapshots have arrived.
  public private(set) var updateCount = 0
  @ObservationIgnored private var task: Task<Void, Never>?

  /// Starts following `machine`'s snapshots.
  public init(machine: UpdateMachine<State, Event, Mutation>) {
    task = Task { [weak self] in
      for await snapshot in await machine.snapshots() {
        guard let self else { return }
        self.snapshot = snapshot
        self.updateCount += 1
      }
    }
  }

  /// Stops following the machine.
  public func stopObserving() {
    task?.cancel()
    task = nil
  }

  isolated deinit {
    task?.cancel()
  }
}
