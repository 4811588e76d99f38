import EventProtocol
import Foundation
import JSONTestSupport
import Testing

// A success body names `result` and `msg` once: the protocol's replies write both themselves, and
// `encodeSuccess` used to add them again (`"msg":"","msg":""` in every register, events and fetch answer).
@Suite("Success bodies")
struct SuccessBodyTests {
  private struct Plain: Codable, Equatable { var length = 3 }

  private func keyCounts(_ data: Data) -> [Int] {
    let text = String(decoding: data, as: UTF8.self)
    return [#""result":"#, #""msg":"#].map { text.components(separatedBy: $0).count - 1 }
  }

  @Test("each reply's body names result and msg once, and reads back")
  func resultOnce() throws {
    var draw = Draw(seed: 5)
    let events = eventsReply(&draw)
    let eventsBody = try WireFormat.encodeSuccess(events)
    #expect(keyCounts(eventsBody) == [1, 1])
    #expect(try WireFormat.decode(EventsReply<ItemEvent>.self, from: eventsBody) == events)

    let registration = Registration(queueID: "q", lastEventID: 4, longPollTimeout: .seconds(90), snapshot: Plain())
    let registrationBody = try WireFormat.encodeSuccess(registration)
    #expect(keyCounts(registrationBody) == [1, 1])
    #expect(try WireFormat.decode(Registration<Plain>.self, from: registrationBody) == registration)

    let request = FetchRequest(narrow: Narrow([]), anchor: .newest, before: 2, after: 0)
    let page = FetchPage(items: [Plain()], foundOldest: true, foundNewest: true)
    let answer = FetchAnswer(queueID: "q", lastEventID: 4, request: request, page: page)
    let answerBody = try WireFormat.encodeSuccess(answer)
    #expect(keyCounts(answerBody) == [1, 1])
    #expect(try WireFormat.decode(FetchAnswer<Plain>.self, from: answerBody) == answer)

    let plainBody = try WireFormat.encodeSuccess(Plain())
    #expect(keyCounts(plainBody) == [1, 1])
    #expect(try WireFormat.decode(Plain.self, from: plainBody) == Plain())
  }
}
