import PinEventLoop
import PinTrust

/// Who a connection came from: its address (what access rules judge), the
/// key it is counted and bounded under (`ClientKey`), and, for a client on
/// this host, its socket's owner. The address stays the value `accept`
/// gave: it is formatted (`peer`) only when a line is written.
struct ClientOrigin: Sendable {
  /// 4 or 16 bytes, inline (none for a peer known by text that is no address).
  let address: IPBytes
  private let accepted: SocketAddress?
  private let label: String?
  let key: String
  let local: LocalPeer?

  /// `1.2.3.4:5` or `[::1]:5`, for log lines and pages.
  var peer: String { label ?? accepted?.description ?? "?" }

  /// `bytes`: the address's bytes, made once by the accept; `keys`: the
  /// accepting loop's memo of the last key it made.
  init(address: SocketAddress, bytes: IPBytes, local: LocalPeer?, keys: inout ClientKeyMemo) {
    self.address = bytes
    (accepted, label) = (address, nil)
    self.local = local
    key = keys.key(bytes: bytes, local: local)
  }

  /// A client known by its text (`host:port`; tests, socket pairs).
  init(peer: String, local: LocalPeer?) {
    address = peerAddressBytes(peer).map(IPBytes.init) ?? IPBytes()
    (accepted, label) = (nil, peer)
    self.local = local
    key = ClientKey.of(peer, user: Self.user(local))
  }

  private static func user(_ local: LocalPeer?) -> String? {
    local.map { $0.uid.map(String.init) ?? "unknown" }
  }

  /// Whether a router made for `other` decides as one made for this origin
  /// would: the same address, and the same user on this host (or both remote).
  func routesAlike(_ other: ClientOrigin) -> Bool {
    address == other.address && (local == nil) == (other.local == nil) && local?.uid == other.local?.uid
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

  private static func with(_ user: String?, _ address: String) -> String {
    guard let user else { return address }
    return address + " uid " + user
  }

  /// The same for an accepted peer: a local one's key is made once per
  /// address key and user and then looked up (every connection of a program
  /// on this host has the same one), not written anew per connection.
  static func of(bytes address: [UInt8], local: LocalPeer?) -> String {
    let base = of(bytes: address)
    guard let local else { return base }
    let parts = LocalKeyParts(address: base, uid: local.uid)
    if let known = localKeys.withLock({ $0[parts] }) { return known }
    let made = with(local.uid.map(String.init) ?? "unknown", base)
    localKeys.withLock { keys in
      // Bounded: past it the table starts again (a key is only ever re-made).
      if keys.count >= 256 { keys.removeAll(keepingCapacity: true) }
      keys[parts] = made
    }
    return made
  }

  private struct LocalKeyParts: Hashable {
    let address: String
    let uid: UInt32?
  }
  private static let localKeys = Locked<[LocalKeyParts: String]>([:])
}

/// The client key a loop made last, by what it was made from: the
/// connections of one program (one per request, say) have the same address
/// and user, and then take the key without the shared table's lock and
/// hash (`ClientKey.of(bytes:local:)`). On its loop only.
struct ClientKeyMemo {
  private var last: (address: IPBytes, isLocal: Bool, uid: UInt32?, key: String)?

  mutating func key(bytes address: IPBytes, local: LocalPeer?) -> String {
    if let last, last.isLocal == (local != nil), last.uid == local?.uid, last.address == address {
      return last.key
    }
    let key = ClientKey.of(bytes: address.array, local: local)
    last = (address, local != nil, local?.uid, key)
    return key
  }
}
