/// The proxy-auth decoder and throttle as the fuzzer drives them
/// (Fuzz/Sources/FuzzProxyAuth): `Proxy-Authorization` values from many
/// client keys through the real `BasicCredentials`, `ProxyAuthenticator`
/// and `AuthThrottle`, state kept across inputs so the table fills. Hashing
/// is replaced by a comparison with the one known password (bcrypt would
/// make each input take milliseconds; `PasswordHash` has tests of its own).
@_spi(Fuzzing) public final class ProxyAuthFuzzing {
  /// alice's password in `htpasswd`.
  public static let password = "fuzz-password-7"
  static let htpasswd = "alice:$2y$05$obKt5qf3ua6B4Lj6sLCBkOG0tmkuwfIDdqIVUXDHE7Gy.xlINpb.O\n"

  private let authenticator: ProxyAuthenticator
  private var now: UInt64 = 1_000_000_000

  public init() {
    guard let file = try? HtpasswdFile(text: Self.htpasswd, name: "fuzz") else {
      fatalError("the fuzz htpasswd entry no longer loads")
    }
    authenticator = ProxyAuthenticator(file: file, realm: "fuzz", logUser: false, state: ProxyAuthState())
  }

  /// Runs one input: lines of `K K field…`, two bytes of client key then
  /// the field. Returns the property that failed, or nil.
  public func run(_ bytes: [UInt8]) -> String? {
    for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).prefix(256) {
      guard line.count >= 2 else { continue }
      let index = line.startIndex
      let client = "k\(Int(line[index]) << 8 | Int(line[index + 1]))"
      let field = String(decoding: line.dropFirst(2), as: UTF8.self)
      now &+= 50_000_000
      if let failure = step(field, client: client) { return failure }
    }
    return nil
  }

  private func step(_ field: String, client: String) -> String? {
    let throttle = authenticator.state.throttle
    let (heldBefore, owed) = throttle.withLock { ($0.count, $0.secondsUntilToken(client, now: now) > 0) }
    let credentials = BasicCredentials(field: field)
    let decision = authenticator.check(field, client: client, now: now)
    if throttle.withLock({ $0.count }) > AuthThrottle.maximumClients {
      return "the throttle outgrew its bound"
    }
    guard let credentials else {
      guard case .refused(let refusal) = decision, refusal.status == 407 else {
        return "a field that is no Basic credential was not refused 407"
      }
      return throttle.withLock({ $0.count }) == heldBefore ? nil : "a malformed field took a token"
    }
    let right = credentials.user == "alice" && credentials.password == Array(Self.password.utf8)
    switch decision {
    case .allowed(let credential):
      return right && credential.user == "alice" ? nil : "a credential was allowed without being verified"
    case .refused(let refusal):
      if refusal.status == 429 && !owed && !right { return "a client in no debt was throttled" }
      return refusal.status == 429 || refusal.status == 407 ? nil : "unexpected refusal \(refusal.status)"
    case .verify(let pending):
      if owed { return "a client in debt was let hash" }
      guard case .allowed = authenticator.conclude(pending, matched: right) else {
        return right ? "the right password was refused" : nil
      }
      guard right else { return "a wrong password was allowed" }
      // Verified once: served from then on, whatever the bucket holds.
      guard case .allowed = authenticator.check(field, client: client, now: now) else {
        return "a verified credential was refused"
      }
      return nil
    }
  }
}
