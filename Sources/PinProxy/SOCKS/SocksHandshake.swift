import PinTrust

/// The SOCKS5 handshake of one client (RFC 1928; RFC 1929 for user name
/// and password) as a state machine over the bytes it sends: it returns
/// what to answer and what was asked, and does no I/O. Every field is
/// bounded where it is decoded (one length byte each); at most
/// `maximumBuffered` bytes wait for a message to complete. CONNECT only:
/// BIND and UDP ASSOCIATE are answered "command not supported".
struct SocksHandshake {
  enum State: Equatable {
    case greeting
    case credentials
    /// A credential is being checked: nothing more is read until it is.
    case checking
    case request
    case done
    case failed
  }

  /// What the session does next.
  enum Step: Equatable {
    /// Nothing complete yet: read more.
    case more
    /// Send these bytes and read on.
    case reply([UInt8])
    /// Check this credential, then call `credentialChecked`.
    case check(BasicCredentials)
    /// Open the tunnel to `host:port`; `early` is what the client sent after
    /// its request. The success reply is sent once the tunnel is open.
    case connect(host: TrustHost, port: Int, early: [UInt8])
    /// Send `reply` (when there is one) and close: `reason` for the log.
    case fail(reply: [UInt8]?, reason: String)
  }

  /// RFC 1928 §6 reply codes.
  enum ReplyCode: UInt8 {
    case succeeded = 0x00
    case generalFailure = 0x01
    case notAllowedByRuleset = 0x02
    case networkUnreachable = 0x03
    case hostUnreachable = 0x04
    case connectionRefused = 0x05
    case ttlExpired = 0x06
    case commandNotSupported = 0x07
    case addressTypeNotSupported = 0x08
  }

  static let maximumBuffered = 1024
  private(set) var state = State.greeting

  /// Still in the handshake, waiting on the client (or on its credential's
  /// check): such a connection holds a slot while owing nothing, so it is
  /// evictable as a half-sent HTTP head is (`SocksSession`).
  var isUnfinished: Bool { state != .done && state != .failed }
  private var buffer: [UInt8] = []
  let requiresPassword: Bool

  init(requiresPassword: Bool) {
    self.requiresPassword = requiresPassword
  }

  /// A reply to the CONNECT request (the bound address is not told: zeros).
  static func reply(_ code: ReplyCode) -> [UInt8] { [5, code.rawValue, 0, 1, 0, 0, 0, 0, 0, 0] }

  /// Takes what the client sent and says what to do. Call again with no
  /// bytes after a `.reply` to read what was already buffered.
  mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Step {
    guard state != .failed, state != .done else { return .more }
    // One read's bytes (bounded by the loop's read buffer); what is left
    // waiting for a message to complete is bounded in `step`.
    buffer.append(contentsOf: bytes)
    return step()
  }

  mutating func step() -> Step {
    let next: Step
    switch state {
    case .greeting: next = greeting()
    case .credentials: next = credentials()
    case .request: next = request()
    case .checking, .done, .failed: next = .more
    }
    guard next == .more, buffer.count > Self.maximumBuffered else { return next }
    return fail(nil, "more than \(Self.maximumBuffered) bytes before the handshake completed")
  }

  /// RFC 1928 §3: VER, NMETHODS, METHODS.
  private mutating func greeting() -> Step {
    guard buffer.count >= 2 else { return .more }
    guard buffer[0] == 5 else { return fail(nil, "not SOCKS5 (version \(buffer[0]))") }
    let count = Int(buffer[1])
    guard count > 0 else { return fail([5, 0xff], "no authentication method offered") }
    guard buffer.count >= 2 + count else { return .more }
    let methods = buffer[2..<(2 + count)]
    buffer.removeFirst(2 + count)
    let wanted: UInt8 = requiresPassword ? 2 : 0
    guard methods.contains(wanted) else {
      return fail(
        [5, 0xff],
        requiresPassword
          ? "the client offers no user name and password (RFC 1929) and this listener requires one"
          : "the client offers no method this listener accepts (no authentication)")
    }
    state = requiresPassword ? .credentials : .request
    return .reply([5, wanted])
  }

  /// RFC 1929 §2: VER 1, ULEN, UNAME, PLEN, PASSWD.
  private mutating func credentials() -> Step {
    guard buffer.count >= 2 else { return .more }
    guard buffer[0] == 1 else { return fail([1, 1], "user name and password: version \(buffer[0]), not 1") }
    let userLength = Int(buffer[1])
    guard buffer.count >= 2 + userLength + 1 else { return .more }
    let passwordLength = Int(buffer[2 + userLength])
    guard buffer.count >= 3 + userLength + passwordLength else { return .more }
    guard userLength > 0, passwordLength > 0 else { return fail([1, 1], "an empty user name or password") }
    let credentials = BasicCredentials(
      user: buffer[2..<(2 + userLength)],
      password: Array(buffer[(3 + userLength)..<(3 + userLength + passwordLength)]))
    buffer.removeFirst(3 + userLength + passwordLength)
    guard let credentials else {
      return fail([1, 1], "a user name no htpasswd file holds (a colon, a control character or not UTF-8)")
    }
    state = .checking
    return .check(credentials)
  }

  /// The credential's verdict (RFC 1929 §2: status 0 success, else close).
  mutating func credentialChecked(_ allowed: Bool, reason: String) -> Step {
    guard state == .checking else { return .more }
    guard allowed else { return fail([1, 1], reason) }
    state = .request
    return .reply([1, 0])
  }

  /// RFC 1928 §4: VER, CMD, RSV, ATYP, DST.ADDR, DST.PORT.
  private mutating func request() -> Step {
    guard buffer.count >= 5 else { return .more }
    guard buffer[0] == 5 else {
      return fail(Self.reply(.generalFailure), "request version \(buffer[0]), not 5")
    }
    let addressLength: Int
    switch buffer[3] {
    case 1: addressLength = 4
    case 4: addressLength = 16
    case 3:
      addressLength = 1 + Int(buffer[4])
      guard buffer[4] > 0 else { return fail(Self.reply(.generalFailure), "an empty domain name") }
    default:
      return fail(Self.reply(.addressTypeNotSupported), "address type \(buffer[3])")
    }
    guard buffer.count >= 4 + addressLength + 2 else { return .more }
    guard buffer[1] == 1 else {
      let command = buffer[1] == 2 ? "BIND" : buffer[1] == 3 ? "UDP ASSOCIATE" : "command \(buffer[1])"
      return fail(Self.reply(.commandNotSupported), "\(command) is not supported (CONNECT only)")
    }
    let type = buffer[3]
    let address = Array(buffer[4..<(4 + addressLength)])
    let port = Int(buffer[4 + addressLength]) << 8 | Int(buffer[5 + addressLength])
    let early = Array(buffer[(6 + addressLength)...])
    buffer = []
    let name =
      type == 3
      ? String(decoding: address.dropFirst(), as: UTF8.self) : (IPAddress(bytes: address)?.description ?? "")
    guard port > 0, let host = TrustHost(name) else {
      return fail(Self.reply(.generalFailure), "\"\(name)\" port \(port) is not a valid destination")
    }
    state = .done
    return .connect(host: host, port: port, early: early)
  }

  private mutating func fail(_ reply: [UInt8]?, _ reason: String) -> Step {
    state = .failed
    buffer = []
    return .fail(reply: reply, reason: reason)
  }
}

extension SocksHandshake.ReplyCode {
  /// The reply that fits a refusal of the CONNECT (RFC 1928 §6): what the
  /// policy or the listener does not allow is "not allowed by ruleset"; an
  /// upstream that cannot be reached, "host unreachable" (or "connection
  /// refused", "TTL expired" for a timeout); the rest a general failure.
  init(_ failure: ProxyFailure) {
    switch failure.code {
    case .deniedByPolicy, .clientNotAllowed, .proxyAuthRequired: self = .notAllowedByRuleset
    case .upstreamUnreachable: self = failure.connectionRefused ? .connectionRefused : .hostUnreachable
    case .upstreamTimeout: self = .ttlExpired
    default: self = failure.status == 403 ? .notAllowedByRuleset : .generalFailure
    }
  }
}
