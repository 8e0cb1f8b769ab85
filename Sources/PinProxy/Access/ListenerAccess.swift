import Dispatch
import PinConfig
import PinEventLoop
import PinTLS
import PinTrust

/// Who may use one proxy listener, compiled with each snapshot so that a
/// reload governs it: the client networks (checked at accept, before a
/// byte is read) and proxy authentication (checked per request). An
/// object: a connection's router holds it with one reference.
final class ListenerAccess: Sendable {
  /// The listener as this snapshot's configuration has it: what the access
  /// was compiled for.
  let address: HostPort?
  let mode: ListenerConfig.Mode?
  let allowedClients: ClientAddressRules
  /// `allowedUsers`: the uids whose programs on this host may connect;
  /// nil: any user.
  let allowedUsers: Set<UInt32>?
  let authenticator: ProxyAuthenticator?
  /// Nobody may use the listener (see `closed`).
  let isClosed: Bool

  init(_ listener: ListenerConfig, authState: ProxyAuthState) throws(HtpasswdFile.Failure) {
    address = listener.address
    mode = listener.mode
    allowedClients = listener.effectiveAllowedClients
    allowedUsers = listener.allowedUsers.map(Set.init)
    authenticator = try listener.proxyAuth.map { config throws(HtpasswdFile.Failure) in
      try ProxyAuthenticator(config: config, state: authState)
    }
    isClosed = false
  }

  private init(closed: Void) {
    (address, mode, allowedClients, allowedUsers, authenticator, isClosed) = (
      nil, nil, ClientAddressRules([]), [], nil, true
    )
  }

  /// For a running listener that the snapshot in force does not have under
  /// the same name, address and mode (a reload renamed, moved or changed
  /// it; those take a restart): fail closed, nobody may use it, rather than
  /// run it under rules written for another listener.
  static let closed = ListenerAccess(closed: ())

  /// Why a client at `peer` (4 or 16 bytes; nil: not checked) and, on this
  /// host, owned by `local`, accepted under an earlier snapshot, may not
  /// use listener `name` under this access; nil when it may.
  func denial(ofListener name: String, to peer: IPBytes?, local: LocalPeer?) -> String? {
    if isClosed {
      return "listener \(name) was renamed, moved or re-moded by a reload; that takes a restart"
    }
    if let peer, !peer.withUnsafeBytes({ allowedClients.allows($0) }) {
      return "a reload took this address out of the listener's allowedClients"
    }
    if let local, !admitsUser(local) {
      return "a reload took user \(local.user) out of the listener's allowedUsers"
    }
    return nil
  }

  /// `allowedUsers` for a client on this host: fail closed, a peer whose
  /// owner the kernel did not tell is not a listed user.
  func admitsUser(_ local: LocalPeer) -> Bool {
    guard let allowedUsers else { return true }
    guard let uid = local.uid else { return false }
    return allowedUsers.contains(uid)
  }
}

/// Who may use the admin endpoint: the networks that may connect, the
/// bearer token (read from `admin.tokenFile` at load and reload), and the
/// scrapers that may read `/metrics` and `/healthz` without it.
struct AdminAccess: Sendable {
  let connectingClients: ClientAddressRules
  /// Whose requests are served (with the token, when one is set); a
  /// scraper outside them may read only `/metrics` and `/healthz`.
  let allowedClients: ClientAddressRules
  let metricsClients: ClientAddressRules
  let token: [UInt8]?

  static let maximumTokenBytes = 4096
  static let minimumTokenBytes = 16

  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  init(_ admin: AdminConfig) throws(Failure) {
    connectingClients = admin.connectingClients
    allowedClients = admin.effectiveAllowedClients
    metricsClients = admin.metricsClients ?? ClientAddressRules([])
    guard let file = admin.tokenFile else {
      token = nil
      return
    }
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(file.path, limit: AdminAccess.maximumTokenBytes)
    } catch {
      throw Failure(description: "token file \(file.path): \(error.description)")
    }
    // One line; surrounding white space (a trailing newline) is not part of it.
    let trimmed = bytes.drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
      .reversed().drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }.reversed()
    let value = Array(trimmed)
    guard value.count >= AdminAccess.minimumTokenBytes, value.allSatisfy({ (0x21...0x7e).contains($0) })
    else {
      throw Failure(
        description:
          "token file \(file.path) must hold one token of at least \(AdminAccess.minimumTokenBytes)"
          + " printable characters without spaces (e.g. openssl rand -hex 32)")
    }
    token = value
  }

  /// `Authorization: Bearer TOKEN` (RFC 6750 §2.1), compared in constant time.
  func tokenMatches(_ field: String?) -> Bool {
    guard let token else { return true }
    guard let field else { return false }
    let parts = field.split(separator: " ", omittingEmptySubsequences: true)
    guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
    return PasswordHash.constantTimeEqual(Array(parts[1].utf8), token)
  }
}
