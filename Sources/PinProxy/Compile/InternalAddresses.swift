import PinConfig
import PinTrust

/// Addresses the proxy will not connect to on behalf of `defaults`: loopback,
/// link-local, unspecified, this machine's own interface addresses (a
/// service bound to 0.0.0.0 is reachable on them too), and the proxy's own
/// listeners. IPv4 embedded in IPv6 (mapped, compatible, NAT64 64:ff9b::/96)
/// is judged as the IPv4 address.
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
  /// This machine's interface addresses, read when the snapshot is compiled.
  let local: Set<[UInt8]>

  init(listening: [HostPort], local: [[UInt8]] = []) {
    own = listening.compactMap { hostPort in
      IPAddress(hostPort.listeningIP).map { ($0, hostPort.port) }
    }
    self.local = Set(local.map(InternalAddresses.unmapped))
  }

  /// Why `address:port` may not be reached through `defaults`; nil when it may.
  func refusal(_ address: IPAddress, port: Int) -> String? {
    let bytes = InternalAddresses.unmapped(address.bytes)
    if InternalAddresses.isLoopback(bytes) { return "\(address) is a loopback address" }
    if local.contains(bytes) { return "\(address) is an address of this machine" }
    if InternalAddresses.isLinkLocal(bytes) { return "\(address) is a link-local address" }
    if bytes.allSatisfy({ $0 == 0 }) || (bytes.count == 4 && bytes[0] == 0) {
      return "\(address) is an unspecified address"
    }
    return ownListener(address, port: port)
  }

  /// Why `address:port` is one of this proxy's own listeners (or its admin
  /// address); nil when it is not. Never reached for a certificate's URL,
  /// whatever the configuration names.
  func ownListener(_ address: IPAddress, port: Int) -> String? {
    let bytes = InternalAddresses.unmapped(address.bytes)
    for (listener, listenerPort) in own where listenerPort == port {
      let listening = InternalAddresses.unmapped(listener.bytes)
      if listening == bytes || listening.allSatisfy({ $0 == 0 }) {
        return "\(address):\(port) is this proxy's own listener"
      }
    }
    return nil
  }

  /// IPv4 carried in IPv6 — mapped (::ffff:a.b.c.d), compatible (::a.b.c.d,
  /// but not :: or ::1) and NAT64 (64:ff9b::a.b.c.d) — as the IPv4 address.
  static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
    guard bytes.count == 16 else { return bytes }
    let tail = Array(bytes[12...])
    if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff { return tail }
    if bytes[0..<12].allSatisfy({ $0 == 0 }) && !(tail[0...2].allSatisfy { $0 == 0 } && tail[3] <= 1) {
      return tail
    }
    if bytes[0..<12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] { return tail }
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
