import EventProtocol
import Testing

/// `QueueID.random(using:)`: 15 characters of `[0-9A-Za-z]`, each equally likely, one draw per character.
///
/// The draws per id are part of what a seed means: the simulation's worlds draw their ids from the same
/// generator as their jitter, so a change in the draws per id changes every seeded world after the first id
/// (and `Demo --answer`'s verdict with it).
@Suite("Random queue ids: the alphabet, every character equally likely, one draw per character")
struct QueueIDRandomTests {
  /// Counts the generator's draws (a draw from the system's generator is a system call).
  struct CountingGenerator: RandomNumberGenerator {
    var base: SeededRandomNumberGenerator
    var draws = 0

    mutating func next() -> UInt64 {
      draws += 1
      return base.next()
    }
  }

  static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

  @Test("every position's characters are uniform over the 62 (chi-square); an id takes one draw per character")
  func uniformAndCheap() {
    var generator = CountingGenerator(base: SeededRandomNumberGenerator(seed: 42))
    let ids = 37_200
    let index = Dictionary(uniqueKeysWithValues: Self.alphabet.enumerated().map { ($1, $0) })
    var counts = Array(repeating: Array(repeating: 0, count: 62), count: 15)
    for _ in 0..<ids {
      let id = Array(QueueID.random(using: &generator).rawValue)
      #expect(id.count == 15)
      for (position, character) in id.enumerated() {
        guard let slot = index[character] else {
          Issue.record("\(character) is not in the alphabet")
          return
        }
        counts[position][slot] += 1
      }
    }
    // 61 degrees of freedom: the chi-square statistic of a uniform position exceeds 100 with probability
    // below 0.2 %; a byte of a draw taken modulo 62 makes 8 characters 25 % likelier (about 300 at this many
    // ids).
    let expected = Double(ids) / 62
    for (position, row) in counts.enumerated() {
      let chiSquare = row.reduce(0) { $0 + (Double($1) - expected) * (Double($1) - expected) / expected }
      #expect(chiSquare < 100, "position \(position): chi-square \(chiSquare)")
    }
    // `Int.random(in:using:)` takes one 64-bit draw per character (a second with probability 62 / 2^64).
    #expect(generator.draws == ids * 15, "\(generator.draws) draws for \(ids) ids")
  }

  @Test("the same seed makes the same ids; a client id is a queue id's characters")
  func deterministic() {
    var first = SeededRandomNumberGenerator(seed: 7)
    var second = SeededRandomNumberGenerator(seed: 7)
    let a = (0..<100).map { _ in QueueID.random(using: &first) }
    let b = (0..<100).map { _ in QueueID.random(using: &second) }
    #expect(a == b)
    #expect(Set(a).count == 100)
    var third = SeededRandomNumberGenerator(seed: 7)
    #expect(ClientID.random(using: &third).rawValue == a[0].rawValue)
  }
}
