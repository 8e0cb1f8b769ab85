import PinTrust

/// The key a client is counted and bounded under (connection limits,
/// upstream budgets, the operator's refusal log).
enum ClientKey {
  /// The client a connection counts against, from `host:port` or
  /// `[v6]:port`: the IPv4 address; all of 127.0.0.0/8 as one (any local
  /// process can bind any of those); an IPv6 /64 (one host usually owns a
  /// whole /64 and can pick any address in it).
  static func of(_ peer: String) -> String {
    guard peer.hasPrefix("[") else {
      // IPv4, as inet_ntop wrote it: the text is the key (runs per accept).
      let host = peer.lastIndex(of: ":").map { String(peer[..<$0]) } ?? peer
      return host.hasPrefix("127.") ? "127.0.0.0/8" : host
    }
    guard let bytes = peerAddressBytes(peer) else { return peer }
    return of(bytes: bytes)
  }

  /// The same key from the address itself (4 or 16 bytes).
  static func of(bytes address: [UInt8]) -> String {
    let bytes = InternalAddresses.unmapped(address)
    if bytes.count == 4 { return bytes[0] == 127 ? "127.0.0.0/8" : IPAddress(bytes: bytes)!.description }
    return IPAddress(bytes: Array(bytes.prefix(8)) + Array(repeating: 0, count: 8))!.description + "/64"
  }
}

/// The address part of a peer as `Connection.peer` writes it (`1.2.3.4:5`,
/// `[::1]:5`), as 4 or 16 bytes.
func peerAddressBytes(_ peer: String) -> [UInt8]? {
  let host: Substring
  if peer.hasPrefix("["), let close = peer.firstIndex(of: "]") {
    host = peer[peer.index(after: peer.startIndex)..<close]
  } else {
    host = peer.lastIndex(of: ":").map { peer[..<$0] } ?? Substring(peer)
  }
  return IPAddress(String(host))?.bytes
}
