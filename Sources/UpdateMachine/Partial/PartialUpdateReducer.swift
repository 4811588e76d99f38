import EventProtocol

/// A reducer whose state holds a ``PartialState``: the items and lists it keeps only in part, fetched by
/// page with ``UpdateMachine/fetch(_:)`` and kept live by events.
///
/// The engine applies every event twice over, in one step: ``UpdateReducer/apply(_:to:)`` to the state, then
/// ``applyPartial(_:to:)`` to the partial part. Keeping the partial part's rule separate is what lets the
/// engine bring a fetched page up to its finger by applying to the page alone the events it has already
/// applied to the state (see `docs/partial-state.md`): no event reaches a fetched item twice or never.
///
/// ```swift
/// struct ChatReducer: PartialUpdateReducer, ReadOnlyUpdateReducer {
///   var initialState: Chat { Chat() }
///   var partialState: WritableKeyPath<Chat, PartialState<Message>> { \.messages }
///   func apply(_ event: ChatEvent, to state: inout Chat) throws(ReducerError) {}
///   func applyPartial(_ event: ChatEvent, to messages: inout PartialState<Message>) throws(ReducerError) {
///     switch event {
///     case .posted(let message), .moved(let message): messages.upsert(message)
///     case .edited(let id, let text): messages.update(id) { $0.text = text }
///     case .deleted(let id): messages.remove(id)
///     }
///   }
/// }
/// ```
public protocol PartialUpdateReducer<State, Event, Mutation>: UpdateReducer {
  /// The items held in part.
  associatedtype Item: PartialItem

  /// Where the state keeps its partial part.
  var partialState: WritableKeyPath<State, PartialState<Item>> { get }

  /// Applies one event to the partial part. It must depend only on the event and the partial part (the
  /// engine also applies it to a page that is not in the state yet).
  /// - Throws: ``ReducerError`` when the event cannot be applied; the engine re-registers rather than skip it.
  func applyPartial(_ event: Event, to partial: inout PartialState<Item>) throws(ReducerError)

  /// How many narrows to fetch again after a re-registration, most recently used first (those on screen).
  /// Default 3.
  var narrowsToRefetch: Int { get }

  /// The page to ask for when fetching a narrow again after a re-registration. Default: the newest 50.
  func refetchRequest(for narrow: Narrow) -> FetchRequest
}

extension PartialUpdateReducer {
  public var narrowsToRefetch: Int { 3 }

  public func refetchRequest(for narrow: Narrow) -> FetchRequest {
    FetchRequest(narrow: narrow, anchor: .newest, before: 50, after: 0)
  }
}

extension PartialUpdateReducer {
  /// ``UpdateReducer/apply(_:to:)``, then ``applyPartial(_:to:)`` on the partial part: what the engine does
  /// with each event.
  public func reduce(_ event: Event, into state: inout State) throws(ReducerError) {
    try apply(event, to: &state)
    try applyPartial(event, to: &state[keyPath: partialState])
  }
}

/// The engine's view of a ``PartialUpdateReducer`` with its item type hidden, so the core (generic over
/// state, event and mutation only) can compose fetched pages.
protocol PartialReducing<State, Event>: Sendable {
  associatedtype State: Codable & Sendable & Equatable
  associatedtype Event: EventPayload

  /// Reads a page of this reducer's items through `transport`.
  func fetchPage<Mutation>(
    _ request: FetchRequest,
    queueID: QueueID,
    through transport: any EventTransport<State, Event, Mutation>
  ) async throws(TransportError) -> any FetchAnswering

  /// Brings a fetched page up to the finger by applying `events` (those after its event id) to the page
  /// alone, then merges it into `state`.
  /// - Returns: `false` when `answer` is not a `FetchAnswer` of this reducer's items.
  func merge(
    _ answer: any Sendable,
    replaying events: [Event],
    into state: inout State,
    keeping shown: Set<Narrow>
  ) throws(ReducerError) -> Bool

  /// The queue was lost: the partial part of `old` becomes stale in `new`; returns the fetches to make again.
  func retire(from old: State, into new: inout State) -> [FetchRequest]

  /// Marks a narrow as used now.
  func markUsed(_ narrow: Narrow, in state: inout State)

  /// Applies the app's limits (when given) and forgets what is past them, keeping `shown`.
  /// - Returns: Whether anything was forgotten.
  func enforce(_ limits: PartialLimits?, keeping shown: Set<Narrow>, in state: inout State) -> Bool
}

/// A ``PartialUpdateReducer`` seen as ``PartialReducing``.
struct PartialComposer<Reducer: PartialUpdateReducer>: PartialReducing {
  typealias State = Reducer.State
  typealias Event = Reducer.Event
  typealias Item = Reducer.Item

  let reducer: Reducer

  func fetchPage<Mutation>(
    _ request: FetchRequest,
    queueID: QueueID,
    through transport: any EventTransport<State, Event, Mutation>
  ) async throws(TransportError) -> any FetchAnswering {
    try await transport.fetch(request, queueID: queueID, as: Item.self)
  }

  func merge(
    _ answer: any Sendable,
    replaying events: [Event],
    into state: inout State,
    keeping shown: Set<Narrow>
  ) throws(ReducerError) -> Bool {
    guard let answer = answer as? FetchAnswer<Item> else { return false }
    let range = answer.completeRange(position: \.position)
    var page = PartialState<Item>(narrowLimit: .max, itemLimit: .max)
    page.merge(answer.page.items, over: range, of: answer.request.narrow)
    for event in events { try reducer.applyPartial(event, to: &page) }
    state[keyPath: reducer.partialState].merge(
      Array(page.known.values),
      over: range,
      of: answer.request.narrow,
      keeping: shown
    )
    return true
  }

  func retire(from old: State, into new: inout State) -> [FetchRequest] {
    var retired = old[keyPath: reducer.partialState]
    _ = retired.retire()
    new[keyPath: reducer.partialState].adoptStale(from: retired)
    return retired.staleNarrowList.prefix(reducer.narrowsToRefetch).map(reducer.refetchRequest(for:))
  }

  func markUsed(_ narrow: Narrow, in state: inout State) {
    state[keyPath: reducer.partialState].markUsed(narrow)
  }

  func enforce(_ limits: PartialLimits?, keeping shown: Set<Narrow>, in state: inout State) -> Bool {
    state[keyPath: reducer.partialState].enforce(limits, keeping: shown)
  }
}
