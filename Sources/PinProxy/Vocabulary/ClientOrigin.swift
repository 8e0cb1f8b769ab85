import PinTrust

/// Who a connection came from: its address and port as logged, the key
/// it is counted and bounded under (`ClientKey`), and, for a client on
/// this host, its socket's owner.
struct ClientOrigin: Sendable {
  let peer: String
  let key: String
  let local: LocalPeer?

  init(peer: String, local: LocalPeer?) {
    self.peer = peer
    self.local = local
    key = ClientKey.of(peer, user: local.map { $0.uid.map(String.init) ?? "unknown" })
  }

  /// `client_user` and `client_program` of log lines, for local peers.
  func addFields(to fields: inout [String: String]) {
    guard let local else { return }
    fields["client_user"] = local.user
    fields["client_program"] = local.program
  }
}

extension ClientKey {
  /// The key of a client on this host: its address key and its user, so
  /// programs running as different users never share a bucket (every
  /// local client has the same address). nil `user`: not a local peer.
  static func of(_ peer: String, user: String?) -> String {
    let address = of(peer)
    guard let user else { return address }
    return address + " uid " + user
  }
}
