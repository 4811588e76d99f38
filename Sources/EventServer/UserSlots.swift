/// The slots of one user's queues, oldest first; a user with one queue (the usual case) needs no array.
struct UserSlots: Sendable, Sequence {
  private var first: Int?
  private var rest: [Int] = []

  init() {}

  var isEmpty: Bool { first == nil }
  var count: Int { first == nil ? 0 : 1 + rest.count }

  mutating func append(_ slot: Int) {
    if first == nil { first = slot } else { rest.append(slot) }
  }

  func makeIterator() -> Iterator {
    Iterator(slots: self)
  }

  struct Iterator: IteratorProtocol {
    fileprivate let slots: UserSlots
    private var index = -1

    fileprivate init(slots: UserSlots) {
      self.slots = slots
    }

    mutating func next() -> Int? {
      defer { index += 1 }
      if index == -1 { return slots.first }
      return index < slots.rest.count ? slots.rest[index] : nil
    }
  }
}
