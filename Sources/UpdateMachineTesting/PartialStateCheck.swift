import EventProtocol
import UpdateMachine

/// Checks a client's `PartialState` against the server's data: every known item must equal the server's
/// item, and every interval of completeness must be true of the server's list. Unknown items and ranges
/// outside the intervals are not checked (nothing is claimed of them).
///
/// `read` answers a fetch the way the server application does at the client's finger. Known items are
/// looked up through the empty narrow (`Narrow` holds every item the user can see when it has no term),
/// anchored at the item's position.
///
/// ```swift
/// let problems = PartialStateCheck.problems(in: state.messages) { request in
///   try? server.application.fetch(request, for: "alice")
/// }
/// #expect(problems.isEmpty)
/// ```
public enum PartialStateCheck {
  /// What is wrong with `partial`, one line a problem; empty when everything it claims is true.
  /// - Parameters:
  ///   - partial: The client's partial state.
  ///   - read: The server's answer to a fetch; `nil` when it refuses (a problem).
  public static func problems<Item: PartialItem>(
    in partial: PartialState<Item>,
    read: (FetchRequest) -> FetchPage<Item>?
  ) -> [String] {
    itemProblems(in: partial, read: read) + intervalProblems(in: partial, read: read)
  }

  /// The known items that differ from the server's (looked up through the empty narrow, anchored at the
  /// item's position; a refused lookup counts as gone).
  public static func itemProblems<Item: PartialItem>(
    in partial: PartialState<Item>,
    read: (FetchRequest) -> FetchPage<Item>?
  ) -> [String] {
    itemProblems(in: partial) { key in
      guard let position = partial.known[key]?.position else { return nil }
      let request = FetchRequest(narrow: Narrow([]), anchor: .position(position), before: 0, after: 0)
      return read(request)?.items.first { $0.position == position }
    }
  }

  /// The known items that differ from the server's, looked up by key: for a server that keeps its items
  /// by key (``itemProblems(in:read:)`` sorts the whole empty narrow for every item).
  public static func itemProblems<Item: PartialItem>(
    in partial: PartialState<Item>,
    serverItem: (Item.Key) -> Item?
  ) -> [String] {
    partial.known.values.sorted(by: { $0.position < $1.position }).compactMap { item in
      let server = serverItem(item.key)
      guard server != item else { return nil }
      return "known item \(item.key) is \(item), the server's is \(server.map { "\($0)" } ?? "gone")"
    }
  }

  /// The intervals of completeness untrue of the server's lists.
  public static func intervalProblems<Item: PartialItem>(
    in partial: PartialState<Item>,
    read: (FetchRequest) -> FetchPage<Item>?
  ) -> [String] {
    var problems: [String] = []
    for narrow in partial.heldNarrows {
      let view = partial.list(narrow)
      for interval in view.complete.intervals {
        let anchor: FetchAnchor =
          switch interval.lowerBound {
          case .oldest: .oldest
          case .position(let position): .position(position)
          case .newest: .newest
          }
        let request = FetchRequest(narrow: narrow, anchor: anchor, before: 0, after: FetchRequest.maximumPageSize)
        guard let page = read(request) else {
          problems.append("the server refused \(request)")
          continue
        }
        let server = page.items.filter { interval.contains(.position($0.position)) }.map(\.key)
        let client = view.items.filter { interval.contains(.position($0.position)) }.map(\.key)
        if server != client {
          problems.append(
            "\(narrow) over \(interval.lowerBound)…\(interval.upperBound): client \(client), server \(server)"
          )
        }
      }
    }
    return problems
  }
}
