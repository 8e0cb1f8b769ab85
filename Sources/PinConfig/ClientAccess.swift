import PinTrust

/// One `allowedClients` entry: an IPv4 or IPv6 network in CIDR notation
/// (`10.0.0.0/8`, `2001:db8::/32`), or a single address (a /32 or /128).
public struct AddressBlock: Sendable, Equatable, CustomStringConvertible {
  /// 4 or 16 bytes, with every bit below `prefix` zero.
  public let network: [UInt8]
  public let prefix: Int

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case notAnAddress(String)
    case prefixOutOfRange(String, maximum: Int)
    /// `192.168.1.1/24`: bits set below the prefix (nginx only warns; an
    /// operator who wrote a host address meant something else).
    case hostBitsSet(String, meant: String)

    public var description: String {
      switch self {
      case .notAnAddress(let text):
        "\"\(text)\" is not an IPv4 or IPv6 address or network such as 192.168.1.0/24 or 2001:db8::/32"
      case .prefixOutOfRange(let text, let maximum):
        "\"\(text)\": the prefix length must be 0 to \(maximum)"
      case .hostBitsSet(let text, let meant):
        "\"\(text)\" has address bits set below its prefix; did you mean \(meant)?"
      }
    }
  }

  public init(network: [UInt8], prefix: Int) {
    self.network = network
    self.prefix = prefix
  }

  public static func parse(_ text: String) -> Result<AddressBlock, ParseError> {
    let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard let address = IPAddress(String(parts[0])) else { return .failure(.notAnAddress(text)) }
    let maximum = address.bytes.count * 8
    var prefix = maximum
    if parts.count == 2 {
      guard parts[1].count <= 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
        let value = Int(parts[1]),
        value <= maximum
      else { return .failure(.prefixOutOfRange(text, maximum: maximum)) }
      prefix = value
    }
    let masked = AddressBlock.mask(address.bytes, prefix: prefix)
    guard masked == address.bytes else {
      return .failure(.hostBitsSet(text, meant: "\(IPAddress(bytes: masked)!)/\(prefix)"))
    }
    // `::ffff:10.0.0.0/104` is an IPv4 network written as IPv6: peers are
    // judged as IPv4 (see `contains`), so the block is kept as IPv4 too.
    if masked.count == 16, prefix >= 96, AddressBlock.unmapped(masked).count == 4 {
      return .success(AddressBlock(network: AddressBlock.unmapped(masked), prefix: prefix - 96))
    }
    return .success(AddressBlock(network: masked, prefix: prefix))
  }

  static func mask(_ bytes: [UInt8], prefix: Int) -> [UInt8] {
    bytes.enumerated().map { index, byte in
      let bits = min(8, max(0, prefix - index * 8))
      return bits == 8 ? byte : byte & ~(0xff >> UInt8(bits))
    }
  }

  /// Whether `address` (4 or 16 bytes) is in the block. An IPv4-mapped IPv6
  /// address (`::ffff:a.b.c.d`, what a dual-stack socket reports) is judged
  /// as the IPv4 address it carries.
  public func contains(_ address: [UInt8]) -> Bool {
    address.withUnsafeBytes { contains($0) }
  }

  /// The same over bytes in place, compared byte by byte under the mask:
  /// checked at every accept, it makes no array.
  public func contains(_ address: UnsafeRawBufferPointer) -> Bool {
    // A mapped address is judged as IPv4 only, never against an IPv6 block.
    let offset = AddressBlock.isMapped(address) ? 12 : 0
    guard address.count - offset == network.count else { return false }
    for index in 0..<network.count {
      let bits = min(8, max(0, prefix - index * 8))
      guard bits > 0 else { break }
      let mask = UInt8(truncatingIfNeeded: 0xff00 >> bits)
      guard address[offset + index] & mask == network[index] else { return false }
    }
    return true
  }

  /// `::ffff:a.b.c.d`.
  static func isMapped(_ address: UnsafeRawBufferPointer) -> Bool {
    address.count == 16 && address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xff
      && address[11] == 0xff
  }

  static func unmapped(_ address: [UInt8]) -> [UInt8] {
    address.withUnsafeBytes { isMapped($0) } ? Array(address[12...]) : address
  }

  /// Every address of its family.
  public var isEverything: Bool { prefix == 0 }

  public var description: String { "\(IPAddress(bytes: network)!)/\(prefix)" }
}

/// Who may connect to a listener: a list of networks. Checked at accept,
/// before a byte is read.
public struct ClientAddressRules: Sendable, Equatable {
  public var blocks: [AddressBlock]

  public init(_ blocks: [AddressBlock]) { self.blocks = blocks }

  /// What a listener on a loopback address allows when it names no rules:
  /// the local machine (`127.0.0.0/8` and `::1`).
  public static let loopback = ClientAddressRules([
    AddressBlock(network: [127, 0, 0, 0], prefix: 8),
    AddressBlock(network: Array(repeating: 0, count: 15) + [1], prefix: 128),
  ])

  /// Anyone: only for a listener that authenticates its clients another way
  /// (`proxyAuth`, a client certificate, an admin token).
  public static let everyone = ClientAddressRules([
    AddressBlock(network: [0, 0, 0, 0], prefix: 0),
    AddressBlock(network: Array(repeating: 0, count: 16), prefix: 0),
  ])

  public func allows(_ address: [UInt8]) -> Bool { blocks.contains { $0.contains(address) } }

  /// The same over bytes in place.
  public func allows(_ address: UnsafeRawBufferPointer) -> Bool { blocks.contains { $0.contains(address) } }

  /// The families (`IPv4`, `IPv6`) whose every address is allowed.
  public var openFamilies: [String] {
    var families: [String] = []
    if blocks.contains(where: { $0.isEverything && $0.network.count == 4 }) { families.append("IPv4") }
    if blocks.contains(where: { $0.isEverything && $0.network.count == 16 }) { families.append("IPv6") }
    return families
  }
}

/// `listeners[].proxyAuth`: HTTP Basic proxy authentication (RFC 9110
/// §11.7.1) against an htpasswd file.
public struct ProxyAuthConfig: Sendable, Equatable {
  public var htpasswd: ConfigPath
  /// Sent in `Proxy-Authenticate: Basic realm="…"`; printable ASCII without quotes or backslashes.
  public var realm = "pinproxy"
  /// Access lines and the per-user metric carry the (verified) user name.
  public var logUser = false

  public init(htpasswd: ConfigPath) { self.htpasswd = htpasswd }
}

/// `listeners[].allowedClientNames`: which client certificates (already
/// verified against `downstreamClientCA`) may use a tunnel listener. A
/// certificate is allowed when any one listed name matches.
public struct ClientNamesConfig: Sendable, Equatable {
  /// The subject's common name, compared exactly.
  public var commonNames: [String] = []
  /// A dNSName in subjectAltName, compared case-insensitively.
  public var dnsNames: [String] = []
  /// A uniformResourceIdentifier in subjectAltName (SPIFFE IDs), compared exactly.
  public var uris: [String] = []

  public init() {}

  public var isEmpty: Bool { commonNames.isEmpty && dnsNames.isEmpty && uris.isEmpty }
}

extension HostPort {
  /// Whether the address to bind is a loopback address (`127.0.0.0/8`,
  /// `::1`, `localhost`): only the local machine can reach it.
  public var isLoopback: Bool {
    guard let address = IPAddress(listeningIP.trimmingBrackets) else { return false }
    return ClientAddressRules.loopback.allows(address.bytes)
  }
}

extension String {
  fileprivate var trimmingBrackets: String {
    hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self
  }
}
