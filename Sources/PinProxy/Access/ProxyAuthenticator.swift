import Dispatch
import PinConfig
import PinTLS
import PinTrust
import Synchronization

/// What proxy authentication keeps across reloads: the verified-credential
/// cache and the per-client failure buckets (a reload must not hand a
/// guesser a fresh bucket). One per process.
public final class ProxyAuthState: Sendable {
  /// Credentials verified once, by SHA-256 of `user:password`, with the
  /// hash they matched. A hit counts only while the file in force still has
  /// that user with that very hash, so a reload that removes a user or
  /// changes a password takes effect at once.
  let verified = Locked<[Digest256: VerifiedCredential]>([:])
  let throttle = Locked(AuthThrottle())
  /// Hashes being computed now, in all; past the bound a credential that
  /// needs hashing is answered 503 rather than queued.
  let hashing = Atomic<Int>(0)
  static let maximumCached = 4096
  static let maximumHashing = 8
  /// bcrypt takes milliseconds by design: it runs here, never on a loop.
  static let queue = DispatchQueue(label: "pinproxy.proxy-auth", attributes: .concurrent)
  /// Random per process and prefixed to what the cache key hashes: the
  /// cache's keys in a memory dump cannot be attacked at SHA-256 speed
  /// without it, nor matched across processes.
  let cacheSalt: [UInt8]

  public init() {
    var generator = SystemRandomNumberGenerator()
    cacheSalt = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
  }
}

/// A user whose password was verified, and the hash it matched.
struct VerifiedCredential: Sendable, Equatable {
  let user: String
  let hash: PasswordHash
}

/// A credential that must be hashed before it is known to be right.
struct PendingCredential: Sendable {
  let credentials: BasicCredentials
  let cacheKey: Digest256
  /// The user's hash; nil for an unknown user (then a real entry's hash is
  /// computed anyway, so the time taken does not tell which users exist).
  let hash: PasswordHash?
  let client: String
}

/// `proxyAuth` of one forward listener, compiled with its snapshot: the
/// htpasswd file as read at load (or reload), the realm, and the shared
/// state. Checks run on the loop and take microseconds; only a credential
/// not seen before is hashed, off the loop.
final class ProxyAuthenticator: Sendable {
  let file: HtpasswdFile
  let realm: String
  let logUser: Bool
  let state: ProxyAuthState
  /// The last time taken by a hash of the decoy's cost (0: none yet).
  private let decoyNanoseconds = Atomic<UInt64>(0)

  enum Decision: Sendable {
    case allowed(VerifiedCredential)
    case refused(AuthRefusal)
    /// Hash it (`verify`, off the loop), then `conclude`.
    case verify(PendingCredential)
  }

  convenience init(config: ProxyAuthConfig, state: ProxyAuthState) throws(HtpasswdFile.Failure) {
    self.init(
      file: try HtpasswdFile(path: config.htpasswd.path), realm: config.realm, logUser: config.logUser,
      state: state)
  }

  init(file: HtpasswdFile, realm: String, logUser: Bool, state: ProxyAuthState) {
    self.file = file
    self.realm = realm
    self.logUser = logUser
    self.state = state
  }

  /// Decides from the `Proxy-Authorization` field of a request as far as
  /// it can without hashing. `client` is the admission key of its address.
  func check(_ field: String?, client: String, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Decision
  {
    guard let field else {
      // The first request of a client that waits to be challenged (Java,
      // browsers): not a failed attempt.
      return .refused(required("this proxy requires a user name and password (Proxy-Authorization: Basic)"))
    }
    // A field that is no Basic credential guesses nothing: it costs no token.
    guard let credentials = BasicCredentials(field: field) else {
      return .refused(required("the Proxy-Authorization field is not a Basic credential"))
    }
    return check(credentials, client: client, now: now)
  }

  /// Decides a credential (a parsed field, or a SOCKS5 client's RFC 1929
  /// user name and password) as far as it can without hashing.
  func check(
    _ credentials: BasicCredentials, client: String, now: UInt64 = DispatchTime.now().uptimeNanoseconds
  ) -> Decision {
    var key = state.cacheSalt + Array(credentials.user.utf8) + [UInt8(ascii: ":")] + credentials.password
    let cacheKey = SHA256.digest(key)
    key.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
    // A credential verified before is served whatever the address's bucket
    // holds: another client's debt never refuses a known-good credential.
    if let known = state.verified.withLock({ $0[cacheKey] }), file.entries[known.user] == known.hash {
      return .allowed(known)
    }
    if let throttled = throttled(client, now: now) { return .refused(throttled) }
    guard state.throttle.withLock({ $0.take(client, now: now) }) else {
      return .refused(throttled(client, now: now) ?? required("too many failed attempts"))
    }
    return .verify(
      PendingCredential(
        credentials: credentials, cacheKey: cacheKey, hash: file.entries[credentials.user], client: client))
  }

  /// Hashes the credential on `ProxyAuthState.queue` and gives `answer`
  /// the final decision there (at once, on the caller's queue, when the
  /// hashing budget is spent); the caller hops back to its loop.
  func verify(_ pending: PendingCredential, then answer: @escaping @Sendable (Decision) -> Void) {
    guard state.hashing.add(1, ordering: .relaxed).newValue <= ProxyAuthState.maximumHashing else {
      state.hashing.subtract(1, ordering: .relaxed)
      state.throttle.withLock { $0.refund(pending.client, now: DispatchTime.now().uptimeNanoseconds) }
      return answer(
        .refused(
          AuthRefusal(
            status: 503, reason: "too many proxy credentials are being checked at once",
            headers: [("Retry-After", "1")])))
    }
    ProxyAuthState.queue.async { [self] in
      let started = DispatchTime.now().uptimeNanoseconds
      let matched = matches(pending)
      let decision = conclude(pending, matched: matched)
      state.hashing.subtract(1, ordering: .relaxed)
      guard !matched else { return answer(decision) }
      // A failed check is answered no sooner than a check against the
      // costliest entry takes, whichever user was named: an unknown user,
      // or a real one with a cheaper hash, cannot be told apart by time.
      let floor = failureFloorNanoseconds()
      let due = started &+ floor
      if DispatchTime.now().uptimeNanoseconds >= due { return answer(decision) }
      ProxyAuthState.queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: due)) { answer(decision) }
    }
  }

  /// Hashes with the user's entry; an unknown user's password is hashed
  /// against the decoy (the costliest entry) and refused. Every hash made
  /// with the decoy's cost updates the failure floor.
  private func matches(_ pending: PendingCredential) -> Bool {
    let hash = pending.hash ?? file.decoy
    let started = DispatchTime.now().uptimeNanoseconds
    let matched = hash?.verify(pending.credentials.password) ?? false
    if let hash, hash.bcryptCost >= file.decoyCost {
      decoyNanoseconds.store(DispatchTime.nanoseconds(since: started), ordering: .relaxed)
    }
    return matched && pending.hash != nil
  }

  /// How long a check against the costliest entry takes, measured once
  /// (with a throw-away password) when no such check has run yet.
  private func failureFloorNanoseconds() -> UInt64 {
    let known = decoyNanoseconds.load(ordering: .relaxed)
    if known > 0 { return known }
    let started = DispatchTime.now().uptimeNanoseconds
    _ = file.decoy?.verify(Array("pinproxy-timing-probe".utf8))
    let measured = max(1, DispatchTime.nanoseconds(since: started))
    decoyNanoseconds.store(measured, ordering: .relaxed)
    return measured
  }

  func conclude(_ pending: PendingCredential, matched: Bool) -> Decision {
    let now = DispatchTime.now().uptimeNanoseconds
    guard matched, let hash = pending.hash else {
      return .refused(required("the user name or password is not right"))
    }
    let credential = VerifiedCredential(user: pending.credentials.user, hash: hash)
    state.throttle.withLock { $0.refund(pending.client, now: now) }
    state.verified.withLock { cache in
      if cache.count >= ProxyAuthState.maximumCached { cache.removeAll(keepingCapacity: true) }
      cache[pending.cacheKey] = credential
    }
    return .allowed(credential)
  }

  /// Whether a credential verified under an earlier file (a CONNECT tunnel
  /// opened before a reload) is still good: same user, same hash.
  func stillAccepts(_ credential: VerifiedCredential) -> Bool {
    file.entries[credential.user] == credential.hash
  }

  /// What a request inside a tunnel (or the tunnel itself) gets when the
  /// credential its CONNECT carried is no longer accepted; nil while it is.
  /// A tunnel opened without one (before `proxyAuth` was configured) has
  /// none to inherit.
  func inheritanceRefusal(_ credential: VerifiedCredential?) -> AuthRefusal? {
    guard let credential, stillAccepts(credential) else {
      return required("the credential this tunnel was opened with is no longer valid")
    }
    return nil
  }

  /// The verified user's name where `logUser` lets it be logged.
  func loggedUser(_ credential: VerifiedCredential?) -> String? { logUser ? credential?.user : nil }

  /// `407` with the challenge (RFC 9110 §11.7.1).
  func required(_ reason: String) -> AuthRefusal {
    AuthRefusal(
      status: 407, reason: reason,
      headers: [("Proxy-Authenticate", "Basic realm=\"\(realm)\", charset=\"UTF-8\"")])
  }

  private func throttled(_ client: String, now: UInt64) -> AuthRefusal? {
    let wait = state.throttle.withLock { $0.secondsUntilToken(client, now: now) }
    guard wait > 0 else { return nil }
    return AuthRefusal(
      status: 429,
      reason: "too many failed proxy credentials from this address; try again in \(wait) s",
      headers: [("Retry-After", String(wait))])
  }
}

/// A refusal of proxy authentication: `407` (no or a wrong credential, with
/// the challenge), `429` (the client's attempts are spent), `503` (too many
/// hashes at once). The session answers it as a `ProxyFailure`.
struct AuthRefusal: Sendable {
  let status: Int
  let reason: String
  let headers: [(name: String, value: String)]
}
