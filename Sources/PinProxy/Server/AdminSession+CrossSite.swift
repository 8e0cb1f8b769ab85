import PinEventLoop
import PinHTTP
import PinTrust

/// A request that changes state (`POST /reload`) must come from a program
/// that meant to send it, never from a web page the operator has open.
///
/// A page of any origin, a page on another port of 127.0.0.1 included, can
/// make a browser send a "simple" POST — a `no-cors` fetch, a form with a
/// `text/plain` body — without asking first, and the endpoint would act on
/// it though the page never reads the answer. So such a request is refused
/// when the browser says it is cross-site or same-site (`Sec-Fetch-Site`),
/// when its `Origin` is not this endpoint's own, and unless it carries
/// `Pinproxy-Admin` — a field no simple request can carry: a page adding it
/// needs a CORS preflight, which this endpoint never answers with
/// `Access-Control-Allow-*`, so a browser never sends it. `pinproxy reload`
/// and `curl -H 'Pinproxy-Admin: 1'` send it. Fail closed: a request
/// passes only with the field and without any sign of another origin.
extension AdminSession {
  /// The field a state-changing request must carry (any value).
  static let requestField = "Pinproxy-Admin"

  /// Why this state-changing request is refused as a possible cross-site
  /// one; nil when it may go on.
  func crossSiteRefusal(_ head: HTTPRequestHead) -> String? {
    if let site = head.headers.first("Sec-Fetch-Site")?.lowercased(),
      site == "cross-site" || site == "same-site"
    {
      return "a \(site) request (Sec-Fetch-Site) cannot change the proxy"
    }
    if let origin = head.headers.first("Origin"), !ownOrigins.contains(origin.lowercased()) {
      return "Origin \(PrintableText.escaped(origin)) is not this endpoint's own"
    }
    guard head.headers.first(Self.requestField) != nil else {
      return "a request that changes the proxy must carry the field \(Self.requestField)"
        + " (pinproxy reload sends it; with curl: -H '\(Self.requestField): 1')"
    }
    return nil
  }

  /// `http://ADDRESS:PORT` as the client reached this endpoint, and
  /// `http://localhost:PORT` when that address is a loopback one: the
  /// origins of this endpoint's own pages.
  private var ownOrigins: [String] {
    guard let here = SocketAddress.local(of: connection.fd) else { return [] }
    let address = here.ipBytes.unmappedIPv4
    let bytes = address.array
    guard let ip = IPAddress(bytes: bytes) else { return [] }
    let host = bytes.count == 16 ? "[\(ip)]" : ip.description
    var origins = ["http://\(host):\(here.port)".lowercased()]
    if address.isLoopback { origins.append("http://localhost:\(here.port)") }
    return origins
  }
}
