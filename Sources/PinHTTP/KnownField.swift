/// The header fields the proxy itself acts on: framing, routing and the
/// hop-by-hop ones. A field is recognised once, where it is parsed or added
/// (by its length, then its bytes, case ignored); asking a list whether it
/// has one, or for its values, then tests a bit or compares a byte per
/// field — no name compared, nothing hashed (nginx's `ngx_http_headers_in`
/// hash plays this part there).
public enum KnownField: UInt8, CaseIterable, Sendable {
  case host
  case contentLength
  case transferEncoding
  case connection
  case proxyConnection
  case keepAlive
  case te
  case trailer
  case upgrade
  case proxyAuthorization
  case proxyAuthenticate

  /// The name as registered (RFC 9110 §16.3.1), lower-cased.
  public var name: StaticString {
    switch self {
    case .host: "host"
    case .contentLength: "content-length"
    case .transferEncoding: "transfer-encoding"
    case .connection: "connection"
    case .proxyConnection: "proxy-connection"
    case .keepAlive: "keep-alive"
    case .te: "te"
    case .trailer: "trailer"
    case .upgrade: "upgrade"
    case .proxyAuthorization: "proxy-authorization"
    case .proxyAuthenticate: "proxy-authenticate"
    }
  }

  /// This field's bit in a set of known fields.
  @inline(__always)
  var bit: UInt32 { 1 &<< UInt32(rawValue) }

  /// The field a name is, if it is one of these; the length picks at most
  /// two candidates.
  static func recognize(_ name: UnsafeBufferPointer<UInt8>) -> KnownField? {
    let candidates: (KnownField?, KnownField?)
    switch name.count {
    case 2: candidates = (.te, nil)
    case 4: candidates = (.host, nil)
    case 7: candidates = (.trailer, .upgrade)
    case 10: candidates = (.connection, .keepAlive)
    case 14: candidates = (.contentLength, nil)
    case 16: candidates = (.proxyConnection, nil)
    case 17: candidates = (.transferEncoding, nil)
    case 18: candidates = (.proxyAuthenticate, nil)
    case 19: candidates = (.proxyAuthorization, nil)
    default: return nil
    }
    if let first = candidates.0, first.isNamed(name) { return first }
    if let second = candidates.1, second.isNamed(name) { return second }
    return nil
  }

  /// The field a name given as text is, if it is one of these.
  static func recognize(_ name: String) -> KnownField? {
    var name = name
    return name.withUTF8 { recognize($0) }
  }

  private func isNamed(_ candidate: UnsafeBufferPointer<UInt8>) -> Bool {
    let name = self.name
    return ASCII.equalsIgnoringCase(
      candidate, UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
  }
}
