import PinHTTP

/// A refusal as bytes on the wire (HTTP/1.1), and its body for either protocol.
extension ProxyFailure {
  /// The response the client gets: plain text naming the code and reason,
  /// or the HTML `page` for a client that asked for HTML; either way the
  /// same status and the `Pinproxy-Error` header.
  func response(closing: Bool = true, page: RefusalPage? = nil) -> [UInt8] {
    response(closing: closing, body: responseBody(page: page), incident: nil)
  }

  /// The same with a body made elsewhere (`Refusal.responseBody(at:)`) and
  /// its incident id in `Pinproxy-Incident`.
  func response(closing: Bool, body bodyAndType: (bytes: [UInt8], type: String), incident: String?) -> [UInt8]
  {
    let (body, type) = bodyAndType
    var headers = HTTPHeaders([
      ("Content-Type", type), ("Content-Length", String(body.count)),
      ("Pinproxy-Error", code.rawValue), ("Cache-Control", "no-store"),
    ])
    if let incident { headers.add("Pinproxy-Incident", incident) }
    for field in self.headers { headers.add(field.name, field.value) }
    if closing { headers.add("Connection", "close") }
    let head = HTTPResponseHead(status: status, reason: reasonPhrase, headers: headers)
    return HTTPSerializer.responseHead(head) + body
  }

  /// The status line's reason carries the code (`Bad Gateway (pinproxy:
  /// pin-mismatch)`): wget, requests, urllib and Java print only the status
  /// line, and RFC 9112 §4 lets the reason phrase be any text a client
  /// ignores. HTTP/2 has no reason phrase; its header carries the code.
  var reasonPhrase: String { "\(ProxyFailure.reasonPhrase(status)) (pinproxy: \(code.rawValue))" }

  /// The body of a refusal made before any request (no incident): the
  /// code and the escaped reason as one line of text.
  func responseBody(page: RefusalPage?) -> (bytes: [UInt8], type: String) {
    guard let page else {
      return (
        Array("pinproxy: \(code.rawValue): \(PrintableText.escaped(reason))\n".utf8),
        "text/plain; charset=utf-8"
      )
    }
    return (page.html(), "text/html; charset=utf-8")
  }
}
