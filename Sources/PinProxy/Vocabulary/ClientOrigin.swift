import PinEventLoop
import PinTrust

/// Who a connection came from: its address (what access rules judge), the
/// key it is counted and bounded under (`ClientKey`), and, for a client on
/// this host, its socket's owner. The address stays the value `accept`
/// gave: it is formatted (`peer`) only when a line is written.
struct ClientOrigin: Sendable {
  /// 4 or 16 bytes.
  let address: [UInt8]
  private let accepted: SocketAddress?
  private let label: String?
  let key: String
  let local: LocalPeer?

  /// `1.2.3.4:5` or `[::1]:5`, for log lines and pages.
  var peer: String { label ?? accepted?.description ?? "?" }

  init(address: SocketAddress, local: LocalPeer?) {
    self.address = address.addressBytes
    (accepted, label) = (address, nil)
    self.local = local
    key = ClientKey.of(bytes: self.address, user: Self.user(local))
  }

  /// A client known by its text (`host:port`; tests, socket pairs).
  init(peer: String, local: LocalPeer?) {
    address = peerAddressBytes(peer) ?? []
    (accepted, label) = (nil, peer)
    self.local = local
    key = ClientKey.of(peer, user: Self.user(local))
  }

  private static func user(_ local: LocalPeer?) -> String? {
    local.map { $0.uid.map(String.init) ?? "unknown" }
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
  static func of(_ peer: String, user: String?) -> String { with(user, of(peer)) }

  /// The same from the address itself (4 or 16 bytes).
  static func of(bytes address: [UInt8], user: String?) -> String { with(user, of(bytes: address)) }

  private static func with(_ user: String?, _ address: String) -> String {
    guard let user else { return address }
    return address + " uid " + user
  }
}
