/// One request of the daemon's own (a pin list fetch, a pin-failure report),
/// sent through the same upstream machinery as client traffic: the domain
/// rule that matches the URL's host (anchors, pins, dynamic pins,
/// `connectTo`, insecure-load rules), a fresh connection, the strict
/// response parser. Bounded in time (`deadline`) and in body size
/// (`maximumBodyBytes`); runs on one event loop and never blocks it.
struct InternalRequest: Sendable {
  var method = "GET"
  var url: InternalURL
  var headers: [(String, String)] = []
  var body: [UInt8] = []
  var deadline: Double = 30
  var maximumBodyBytes = InternalRequest.defaultMaximumBodyBytes
  /// A revocation fetch (a CRL distribution point, an OCSP responder):
  /// plain HTTP to wherever the verified certificate points, outside the
  /// domain rules; it carries no client data. An internal address is
  /// reached only where a domain rule names the host or `connectTo` maps
  /// it, and the proxy's own listeners never.
  var followsCertificate = false
  /// Where the body's storage is charged as it arrives; nil: not charged.
  var budget: FetchBudget?
  /// A pin list, fetched or read from a file, is at most this large.
  static let defaultMaximumBodyBytes = 1 << 20
}
