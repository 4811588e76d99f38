import EventProtocol
import HTTPTypes
import Hummingbird

extension Router {
  /// Answers 405 with an `Allow` header for every method a path does not serve (404 would say the path
  /// does not exist).
  public func refuseOtherMethods(on path: String, allowing allowed: [HTTPRequest.Method]) {
    let all: [HTTPRequest.Method] = [.get, .put, .post, .delete, .patch, .options, .trace, .init("QUERY")!]
    let allow = allowed.map(\.rawValue).joined(separator: ", ")
    for method in all where !allowed.contains(method) {
      on(RouterPath(path), method: method) { _, _ in
        var response = HTTPAnswer.failure(
          .badRequest("\(method.rawValue) is not allowed on /\(path); use \(allow)"),
          status: .methodNotAllowed
        )
        response.headers[.allow] = allow
        return response
      }
    }
  }
}
