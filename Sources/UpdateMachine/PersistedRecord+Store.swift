import EventProtocol
import Foundation

extension PersistedRecord {
  /// The record a machine with `reducer` would start from: the stored record, restored part by part, with
  /// the store's journal replayed onto it. For tools, tests and debugging; the machine itself also retries
  /// reads and sets aside what it cannot use.
  ///
  /// ```swift
  /// let record = try PersistedRecord.load(from: FileStore(url: url), for: GreetingsReducer())
  /// print(record?.finger, record?.outbox.count)
  /// ```
  /// - Returns: The record, or `nil` when nothing usable is stored.
  /// - Throws: ``PersistenceError`` when the store cannot be read.
  public static func load<Reducer: UpdateReducer>(
    from store: any UpdateStore,
    for reducer: Reducer
  ) throws(PersistenceError) -> PersistedRecord?
  where Reducer.State == State, Reducer.Mutation == Mutation {
    guard let data = try store.load(), let record = restore(from: data, for: reducer).record else { return nil }
    guard let journaling = store as? any JournalingUpdateStore,
      let entries = try journaling.loadJournal(after: data)
    else { return record }
    return JournalEntry.replay(entries, onto: record, with: reducer).record
  }

  /// The journal entry a machine appends to a ``JournalingUpdateStore`` when `events` were applied to the
  /// state and the rest of the record is now this one: for custom stores, tools and benchmarks.
  /// - Throws: ``PersistenceError`` when the record or an event does not encode.
  public func journalEntry<Event: EventPayload>(appending events: [Event]) throws(PersistenceError) -> Data {
    try JournalEntry(self, events: AppliedEvents(events)).encoded()
  }
}
