import PinConfig
import PinTrust

/// Addresses the proxy will not connect to for a host no rule names exactly: loopback,
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

  /// `defaults.allowedNetworks`: internal networks the operator opened to
  /// hosts no rule names.
  let allowedNetworks: [AddressBlock]

  init(listening: [HostPort], local: [[UInt8]] = [], allowedNetworks: [AddressBlock] = []) {
    own = listening.compactMap { hostPort in
      IPAddress(hostPort.listeningIP).map { ($0, hostPort.port) }
    }
    self.local = Set(local.map(InternalAddresses.unmapped))
    self.allowedNetworks = allowedNetworks
  }

  /// Why `defaults` may not reach `address:port` (a host no rule names):
  /// everything `refusal` refuses, and every special-purpose range an
  /// egress proxy keeps clients out of — private (RFC 1918), shared
  /// (RFC 6598), unique local, multicast and reserved space, the cloud
  /// metadata address — judged on the IPv4 address an IPv6 one embeds
  /// (mapped, NAT64, 6to4, Teredo), unless `defaults.allowedNetworks`
  /// opens it. nil when it may. A rule that names the host, or `connectTo`,
  /// is the operator's explicit choice and is not judged here.
  func egressRefusal(_ address: IPAddress, port: Int) -> String? {
    let bytes = address.bytes
    let judged = InternalAddresses.embeddedIPv4(bytes) ?? bytes
    let embedded = judged == bytes ? "" : " (the IPv4 address \(IPAddress(bytes: judged)!) inside it)"
    // Loopback, link-local (the metadata service among them) and this
    // machine's own addresses stay closed whatever `allowedNetworks` opens.
    if judged == [169, 254, 169, 254] {
      return "\(address)\(embedded) is the cloud metadata service (169.254.169.254)"
    }
    if let refusal = refusal(address, port: port) { return refusal }
    if InternalAddresses.isLoopback(judged) || InternalAddresses.isLinkLocal(judged) {
      return "\(address)\(embedded) is a loopback or link-local address"
    }
    guard let range = InternalAddresses.specialPurposeRange(judged),
      !allowedNetworks.contains(where: { $0.contains(judged) || $0.contains(bytes) })
    else { return nil }
    return "\(address)\(embedded) is in \(range); only a rule naming the host or defaults.allowedNetworks"
      + " reaches it"
  }

  /// The IPv4 address an IPv6 one carries: mapped, compatible and NAT64
  /// (`unmapped`), 6to4 (2002::/16, RFC 3056: bits 16–47) and Teredo
  /// (2001::/32, RFC 4380: the client's address, bits 96–127 inverted).
  /// nil for an IPv4 address or an IPv6 one that carries none.
  static func embeddedIPv4(_ bytes: [UInt8]) -> [UInt8]? {
    guard bytes.count == 16 else { return nil }
    let unmapped = unmapped(bytes)
    if unmapped.count == 4 { return unmapped }
    if bytes[0] == 0x20 && bytes[1] == 0x02 { return Array(bytes[2...5]) }
    if bytes[0..<4] == [0x20, 0x01, 0, 0] { return bytes[12...15].map { $0 ^ 0xff } }
    return nil
  }

  /// The special-purpose range (RFC 6890 and its updates) `bytes` is in,
  /// named for the refusal; nil for an address in public space.
  static func specialPurposeRange(_ bytes: [UInt8]) -> String? {
    let ranges = bytes.count == 4 ? ipv4Ranges : ipv6Ranges
    return ranges.first { $0.block.contains(bytes) }.map { "\($0.block), \($0.name)" }
  }

  private static let ipv4Ranges: [(block: AddressBlock, name: String)] = [
    (AddressBlock(network: [0, 0, 0, 0], prefix: 8), "\"this network\" (RFC 1122)"),
    (AddressBlock(network: [10, 0, 0, 0], prefix: 8), "private space (RFC 1918)"),
    (
      AddressBlock(network: [100, 64, 0, 0], prefix: 10), "shared address space, carrier-grade NAT (RFC 6598)"
    ),
    (AddressBlock(network: [127, 0, 0, 0], prefix: 8), "loopback"),
    (AddressBlock(network: [169, 254, 0, 0], prefix: 16), "link-local"),
    (AddressBlock(network: [172, 16, 0, 0], prefix: 12), "private space (RFC 1918)"),
    (AddressBlock(network: [192, 0, 0, 0], prefix: 24), "IETF protocol assignments (RFC 6890)"),
    (AddressBlock(network: [192, 168, 0, 0], prefix: 16), "private space (RFC 1918)"),
    (AddressBlock(network: [224, 0, 0, 0], prefix: 4), "multicast"),
    (AddressBlock(network: [240, 0, 0, 0], prefix: 4), "reserved space and broadcast"),
  ]

  private static let ipv6Ranges: [(block: AddressBlock, name: String)] = [
    (AddressBlock(network: Array(repeating: 0, count: 16), prefix: 128), "the unspecified address"),
    (AddressBlock(network: Array(repeating: 0, count: 15) + [1], prefix: 128), "loopback"),
    (
      AddressBlock(
        network: [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01] + Array(repeating: 0, count: 10), prefix: 48),
      "local-use NAT64 (RFC 8215)"
    ),
    (
      AddressBlock(network: [0xfc] + Array(repeating: 0, count: 15), prefix: 7),
      "unique local addresses (RFC 4193)"
    ),
    (AddressBlock(network: [0xfe, 0x80] + Array(repeating: 0, count: 14), prefix: 10), "link-local"),
    (AddressBlock(network: [0xff] + Array(repeating: 0, count: 15), prefix: 8), "multicast"),
  ]

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
  /// whatever the configuration names. Fail closed: a listener on the
  /// unspecified address (0.0.0.0, ::) counts on every address at its
  /// port, since the machine may be reached on addresses its interface
  /// list does not show (a NAT, an address added since the snapshot).
  func ownListener(_ address: IPAddress, port: Int) -> String? {
    ownListener(address, port: port, wildcardOnThisMachineOnly: false)
  }

  /// The same for a parent proxy the operator named: a listener on the
  /// unspecified address counts only on this machine's own addresses
  /// (loopback, its interfaces), so a parent elsewhere on the proxy's own
  /// port is not taken for the proxy itself.
  func ownListenerAsParent(_ address: IPAddress, port: Int) -> String? {
    ownListener(address, port: port, wildcardOnThisMachineOnly: true)
  }

  private func ownListener(_ address: IPAddress, port: Int, wildcardOnThisMachineOnly: Bool) -> String? {
    let bytes = InternalAddresses.unmapped(address.bytes)
    let wildcardReaches =
      !wildcardOnThisMachineOnly || InternalAddresses.isLoopback(bytes) || local.contains(bytes)
      || bytes.allSatisfy { $0 == 0 }
    for (listener, listenerPort) in own where listenerPort == port {
      let listening = InternalAddresses.unmapped(listener.bytes)
      if listening == bytes || (wildcardReaches && listening.allSatisfy({ $0 == 0 })) {
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
