import EventProtocol

extension FetchPage {
  /// The page `request` selects, read as two bounded range queries around its anchor instead of from the
  /// whole list: what a ``StoredApplication`` answers a fetch with, at a cost that does not grow with its
  /// tables. It equals ``select(_:request:position:)`` over the narrow's whole list.
  ///
  /// ```swift
  /// let page = try await FetchPage<StoredNote>.reading(request) { split, limit in
  ///   try await transaction.execute(
  ///     "SELECT id, text FROM notes WHERE recipient = ? AND id < ? ORDER BY id DESC LIMIT ?",
  ///     [.text(user.rawValue), .integer(split), .integer(Int64(limit))]
  ///   ).map(StoredNote.init(row:))
  /// } after: { split, limit in
  ///   try await transaction.execute(
  ///     "SELECT id, text FROM notes WHERE recipient = ? AND id >= ? ORDER BY id LIMIT ?",
  ///     [.text(user.rawValue), .integer(split), .integer(Int64(limit))]
  ///   ).map(StoredNote.init(row:))
  /// } position: { $0.id }
  /// ```
  /// - Parameters:
  ///   - request: The fetch.
  ///   - before: At most `limit` items at positions below `split`, nearest first (descending).
  ///   - after: At most `limit` items at positions from `split` on, nearest first (ascending).
  ///   - position: Each item's position in the narrow.
  /// - Returns: The page, with whether it reaches the oldest and the newest item.
  /// - Throws: What the queries threw.
  public static func reading(
    _ request: FetchRequest,
    before: (_ split: Int64, _ limit: Int) async throws -> [Item],
    after: (_ split: Int64, _ limit: Int) async throws -> [Item],
    position: (Item) -> Int
  ) async throws -> FetchPage {
    let split: Int64
    let anchorIncluded: Int
    switch request.anchor {
    case .oldest: (split, anchorIncluded) = (.min, 0)
    case .newest: (split, anchorIncluded) = (.max, 0)
    case .position(let anchor): (split, anchorIncluded) = (Int64(anchor), 1)
    }
    // One more than asked on each side tells whether the page reaches the oldest or the newest item.
    let earlier = try await before(split, request.before + 1)
    var later = try await after(split, request.after + anchorIncluded + 1)
    // The anchor's own item counts beside the `after` items, as in Zulip.
    let anchorFound = later.first.map { Int64(position($0)) == split } == true
    let laterLimit = request.after + (anchorFound ? anchorIncluded : 0)
    let foundNewest = later.count <= laterLimit
    later = Array(later.prefix(laterLimit))
    return FetchPage(
      items: earlier.prefix(request.before).reversed() + later,
      foundOldest: earlier.count <= request.before,
      foundNewest: foundNewest
    )
  }
}
