import EventProtocol
import EventServer
import UpdateMachine

// PARTIAL-EXAMPLE-BEGIN
/// A help desk: too many tickets to hold, so each team's queue of tickets is a narrow (`team:billing`),
/// fetched by page and kept live.
struct Ticket: PartialItem, Hashable {
  var number: Int  // the server numbers tickets in order: the position
  var team: String
  var title: String
  var isOpen: Bool

  var key: Int { number }
  var position: Int { number }
  func belongs(to narrow: Narrow) -> Bool {
    narrow.terms.allSatisfy { $0.operator == "team" && $0.operand == team }
  }
}

enum TicketEvent: EventPayload {
  case opened(Ticket)  // a new ticket: the whole item
  case reassigned(Ticket)  // moves between narrows: the whole item
  case closed(number: Int)  // a partial change: only known tickets take it

  static let knownEventTypes: Set<String> = ["ticket_opened", "ticket_reassigned", "ticket_closed"]
  var eventType: String {
    switch self {
    case .opened: "ticket_opened"
    case .reassigned: "ticket_reassigned"
    case .closed: "ticket_closed"
    }
  }
}

/// The client's state: a whole part from the registration (the open count) and the tickets held in part.
struct HelpDesk: Codable, Sendable, Equatable {
  var openTickets = 0
  var tickets = PartialState<Ticket>()
}

struct HelpDeskReducer: PartialUpdateReducer {
  var initialState: HelpDesk { HelpDesk() }
  var partialState: WritableKeyPath<HelpDesk, PartialState<Ticket>> { \.tickets }

  func apply(_ event: TicketEvent, to state: inout HelpDesk) throws(ReducerError) {
    if case .opened = event { state.openTickets += 1 }
    if case .closed = event { state.openTickets -= 1 }
  }

  func applyPartial(_ event: TicketEvent, to tickets: inout PartialState<Ticket>) throws(ReducerError) {
    switch event {
    case .opened(let ticket), .reassigned(let ticket): tickets.upsert(ticket)
    case .closed(let number): tickets.update(number) { $0.isOpen = false }
    }
  }

  func applyOptimistically(_ title: String, to state: inout HelpDesk) {}  // the app opens tickets by title
}

/// The server's side: its snapshot holds the whole part only; `fetch` reads a page of a team's tickets.
struct HelpDeskServer: ServerApplication, Codable {
  var tickets: [Ticket] = []  // in number order

  func snapshot(for user: UserID) -> HelpDesk {
    HelpDesk(openTickets: tickets.filter(\.isOpen).count)
  }

  mutating func handle(_ command: String, from user: UserID) throws(CommandRejection) -> [Delivery<TicketEvent>] {
    let ticket = Ticket(number: tickets.count + 1, team: "billing", title: command, isOpen: true)
    tickets.append(ticket)
    return [Delivery(to: ["ana"], event: .opened(ticket))]
  }

  func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<Ticket> {
    FetchPage.select(tickets.filter { $0.belongs(to: request.narrow) }, request: request, position: \.number)
  }
}

/// The app's memory bound: at most 20 teams' lists and 2,000 tickets held (the list on screen stays).
func helpDeskConfiguration() -> UpdateMachineConfiguration {
  var configuration = UpdateMachineConfiguration()
  configuration.partialLimits = PartialLimits(narrows: 20, items: 2_000)
  return configuration
}

/// The app: show the newest 20 billing tickets, and keep them live.
func showBilling(_ machine: UpdateMachine<HelpDesk, TicketEvent, String>) async -> [Ticket] {
  let billing = Narrow([NarrowTerm("team", "billing")])
  await machine.show([billing])  // on screen: never forgotten while shown
  guard await machine.fetch(FetchRequest(narrow: billing, anchor: .newest, before: 20, after: 0)) == .merged
  else { return [] }
  let list = await machine.snapshot.state?.tickets.list(billing)
  return list?.itemsToShow ?? []  // stale tickets too, after a lost queue, until fetched again
}
// PARTIAL-EXAMPLE-END
