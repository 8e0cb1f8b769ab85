import PinTrust

/// The host a TLS client asks for, read from the first bytes of a spliced
/// tunnel: the `server_name` extension (RFC 6066 §3) of its ClientHello
/// (RFC 8446 §4.1.2; the same layout since TLS 1.0). Pure: it sees bytes,
/// says what they are, and keeps at most `maximumBytes` of them.
///
/// The ClientHello may arrive in pieces and span several handshake
/// records (RFC 8446 §5.1); every length is checked against the bytes
/// there and against its parent's, and anything malformed is `.malformed`,
/// never a guess. With Encrypted Client Hello (RFC 9849) this is the outer
/// name, the client-facing server's.
struct ClientHelloName {
  enum Verdict: Equatable {
    /// Not enough bytes yet.
    case more
    /// The ClientHello names this host (lowercased, without a final dot).
    case named(String)
    /// A ClientHello without `server_name`.
    case unnamed
    /// Not a TLS handshake, or a malformed or oversized one: `reason` says which.
    case malformed(String)
  }

  /// The bytes kept while the ClientHello is incomplete: its records'
  /// headers and a handshake message of up to 32 KiB (a post-quantum key
  /// share makes today's about 1.8 KiB).
  static let maximumBytes = 32 * 1024 + 64
  private static let recordHeader = 5
  private static let handshakeRecord: UInt8 = 22
  private static let clientHello: UInt8 = 1

  /// Everything the client has sent so far (what the tunnel then forwards).
  private(set) var received: [UInt8] = []
  private(set) var verdict = Verdict.more
  /// Where the first record not yet taken apart begins in `received`.
  private var nextRecord = 0
  /// The payloads of the complete handshake records so far.
  private var handshake: [UInt8] = []

  /// Takes the client's next bytes; once the verdict is not `.more` it no
  /// longer changes, and later bytes are the caller's to forward. Each
  /// byte is looked at a bounded number of times however it is split.
  mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Verdict {
    guard verdict == .more else { return verdict }
    guard received.count + bytes.count <= Self.maximumBytes else {
      verdict = .malformed("the ClientHello is larger than \(Self.maximumBytes) bytes")
      return verdict
    }
    received.append(contentsOf: bytes)
    verdict = takeRecords()
    return verdict
  }

  /// Moves complete records' payloads into `handshake` until the
  /// ClientHello in them is whole, then judges it; what follows it is not
  /// looked at, so the verdict is the same however the bytes were split.
  private mutating func takeRecords() -> Verdict {
    while received.count - nextRecord >= Self.recordHeader {
      let at = nextRecord
      guard received[at] == Self.handshakeRecord else {
        return .malformed(
          at == 0 ? "the tunnel's first bytes are not a TLS handshake" : "a ClientHello cut by another record")
      }
      // Record versions 3.0 (SSL 3) to 3.4 are what ClientHellos carry.
      guard received[at + 1] == 3, received[at + 2] <= 4 else { return .malformed("not a TLS record version") }
      let length = Int(received[at + 3]) << 8 | Int(received[at + 4])
      guard length > 0, length <= 16_384 else { return .malformed("a handshake record of \(length) bytes") }
      let end = at + Self.recordHeader + length
      guard end <= received.count else { return .more }
      handshake += received[(at + Self.recordHeader)..<end]
      nextRecord = end
      if let verdict = judgeHandshake() { return verdict }
    }
    return .more
  }

  /// The ClientHello's verdict once the handshake bytes hold all of it; nil before.
  private func judgeHandshake() -> Verdict? {
    guard handshake.count >= 4 else { return nil }
    guard handshake[0] == Self.clientHello else {
      return .malformed("the first handshake message is not a ClientHello")
    }
    let length = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
    guard handshake.count >= 4 + length else { return nil }
    return Self.serverName(inClientHello: handshake[4..<(4 + length)])
  }

  /// The `server_name` of a ClientHello body (after its 4-byte header).
  static func serverName(inClientHello body: ArraySlice<UInt8>) -> Verdict {
    var reader = Reader(body)
    // legacy_version, random, legacy_session_id, cipher_suites, legacy_compression_methods.
    guard reader.skip(2 + 32), reader.skipVector(lengthBytes: 1, maximum: 32),
      reader.skipVector(lengthBytes: 2, maximum: 65_534), reader.skipVector(lengthBytes: 1, maximum: 255)
    else { return .malformed("a truncated ClientHello") }
    // A ClientHello may end here: no extensions, so no name.
    if reader.isAtEnd { return .unnamed }
    guard var extensions = reader.vector(lengthBytes: 2), reader.isAtEnd else {
      return .malformed("the ClientHello's extensions do not fill it")
    }
    var name: String?
    var seen: Set<UInt16> = []
    while !extensions.isAtEnd {
      guard let type = extensions.number(bytes: 2), var data = extensions.vector(lengthBytes: 2) else {
        return .malformed("a truncated extension")
      }
      // RFC 8446 §4.2: no extension type appears twice.
      guard seen.insert(UInt16(type)).inserted else { return .malformed("extension \(type) appears twice") }
      guard type == 0 else { continue }
      guard var list = data.vector(lengthBytes: 2), data.isAtEnd, !list.isAtEnd else {
        return .malformed("a malformed server_name extension")
      }
      while !list.isAtEnd {
        guard let kind = list.number(bytes: 1), let host = list.vector(lengthBytes: 2) else {
          return .malformed("a malformed server_name entry")
        }
        // RFC 6066 §3: one name of each type; host_name (0) is the only one defined.
        guard kind == 0 else { continue }
        guard name == nil else { return .malformed("two host names in server_name") }
        guard let text = hostName(host.rest) else { return .malformed("server_name is not a host name") }
        name = text
      }
    }
    return name.map(Verdict.named) ?? .unnamed
  }

  /// RFC 6066 §3: an ASCII host name without a final dot (accepted here
  /// with one, and dropped), no IP literal; lowercased.
  private static func hostName(_ bytes: ArraySlice<UInt8>) -> String? {
    guard !bytes.isEmpty, bytes.count <= 255 else { return nil }
    var text = ""
    for byte in bytes {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"),
        UInt8(ascii: "."), UInt8(ascii: "_"):
        text.unicodeScalars.append(Unicode.Scalar(byte))
      case UInt8(ascii: "A")...UInt8(ascii: "Z"):
        text.unicodeScalars.append(Unicode.Scalar(byte + 32))
      default:
        return nil
      }
    }
    if text.hasSuffix(".") { text.removeLast() }
    guard let host = TrustHost(text), case .dns = host else { return nil }
    return host.description
  }

  /// A bounds-checked cursor over a slice.
  private struct Reader {
    var rest: ArraySlice<UInt8>
    init(_ bytes: ArraySlice<UInt8>) { rest = bytes }
    var isAtEnd: Bool { rest.isEmpty }

    mutating func skip(_ count: Int) -> Bool {
      guard rest.count >= count else { return false }
      rest = rest.dropFirst(count)
      return true
    }

    mutating func number(bytes count: Int) -> Int? {
      guard rest.count >= count else { return nil }
      let value = rest.prefix(count).reduce(0) { $0 << 8 | Int($1) }
      rest = rest.dropFirst(count)
      return value
    }

    /// A vector with a `lengthBytes`-byte length (RFC 8446 §3.4).
    mutating func vector(lengthBytes: Int) -> Reader? {
      guard let length = number(bytes: lengthBytes), rest.count >= length else { return nil }
      let inner = Reader(rest.prefix(length))
      rest = rest.dropFirst(length)
      return inner
    }

    mutating func skipVector(lengthBytes: Int, maximum: Int) -> Bool {
      guard let inner = vector(lengthBytes: lengthBytes) else { return false }
      return inner.rest.count <= maximum
    }
  }
}
