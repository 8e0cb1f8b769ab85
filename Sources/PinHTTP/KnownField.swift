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

  /// A word at a time (`recognize` runs for every field line): the names
  /// are lower-case letters and `-`, so a word of the candidate matches
  /// when, with bit 0x20 set in the bytes where the name has a letter (a
  /// letter's bit 0x40 shifted down), it equals the name's word. Where the
  /// name has `-` the byte must be `-` itself (a CR, 0x0D, is `-` with 0x20
  /// set). The last word overlaps the one before it rather than being read
  /// a byte at a time; a name under eight bytes is read as two overlapping
  /// four-byte words, or bytes under four.
  private func isNamed(_ candidate: UnsafeBufferPointer<UInt8>) -> Bool {
    let name = self.name
    let count = name.utf8CodeUnitCount
    guard candidate.count == count, let start = candidate.baseAddress else { return false }
    let want = UnsafeRawBufferPointer(start: name.utf8Start, count: count)
    let have = UnsafeRawBufferPointer(start: start, count: count)
    @inline(__always) func matches(_ want: UInt64, _ have: UInt64) -> Bool {
      have | ((want & (ByteWord.ones &* 0x40)) &>> 1) == want
    }
    @inline(__always) func half(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
      UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
    }
    if count >= 8 {
      var offset = 0
      while offset + 8 < count {
        guard matches(ByteWord.load(want, offset), ByteWord.load(have, offset)) else { return false }
        offset += 8
      }
      return matches(ByteWord.load(want, count - 8), ByteWord.load(have, count - 8))
    }
    if count >= 4 {
      return matches(half(want, 0), half(have, 0)) && matches(half(want, count - 4), half(have, count - 4))
    }
    for offset in 0..<count where !matches(UInt64(want[offset]), UInt64(have[offset])) { return false }
    return true
  }
}
