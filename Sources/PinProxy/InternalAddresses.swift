import PinTrust

/// Addresses the proxy will not connect to on behalf of `defaults`: loopback,
/// link-local, unspecified, and the proxy's own listeners.
///
/// Without this, any local client could use `defaults: {action: validate}`
/// to reach services bound to 127.0.0.1 (SSRF) or to scan them. A domain
/// rule that names such a host, a `connectTo` mapping, a passthrough entry
/// and a tunnel listener's `upstream` are the operator's explicit choices and
/// are not affected: the check guards only what no configuration named.
struct InternalAddresses: Sendable {
  /// Listener and admin addresses: (address, port); an unspecified address
  /// (0.0.0.0, ::) stands for every local address.
  let own: [(IPAddress, Int)]

  init(listening: [HostPort]) {
    own = listening.compactMap { hostPort in
      let host = hostPort.host == "localhost" ? "127.0.0.1" : hostPort.host
      return IPAddress(host).map { ($0, hostPort.port) }
    }
  }

  /// Why `address:port` may not be reached through `defaults`; nil when it may.
  func refusal(_ address: IPAddress, port: Int) -> String? {
    let bytes = InternalAddresses.unmapped(address.bytes)
    if InternalAddresses.isLoopback(bytes) { return "\(address) is a loopback address" }
    if InternalAddresses.isLinkLocal(bytes) { return "\(address) is a link-local address" }
    if bytes.allSatisfy({ $0 == 0 }) || (bytes.count == 4 && bytes[0] == 0) {
      return "\(address) is an unspecified address"
    }
    for (listener, listenerPort) in own where listenerPort == port {
      let listening = InternalAddresses.unmapped(listener.bytes)
      if listening == bytes || listening.allSatisfy({ $0 == 0 }) {
        return "\(address):\(port) is this proxy's own listener"
      }
    }
    return nil
  }

  /// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as the IPv4 one.
  static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
    if bytes.count == 16 && bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
      return Array(bytes[12...])
    }
    return bytes
  }

  static func isLoopback(_ bytes: [UInt8]) -> Bool {
    if bytes.count == 4 { return bytes[0] == 127 }
    return bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
  }

  static func isLinkLocal(_ bytes: [UInt8]) -> Bool {
    if bytes.count == 4 { return bytes[0] == 169 && bytes[1] == 254 }
    return bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80
  }
}
