/// An IP address's bytes, 4 (IPv4) or 16 (IPv6), held inline: made from an
/// accepted socket's address without allocating, compared and hashed as
/// bytes. An accepted peer is known by this value from `accept` to its
/// admission key and its owner's look-up; it becomes text only when a
/// line or a page names it.
public struct IPBytes: Sendable, Hashable, RandomAccessCollection {
  /// The bytes in order, zero past `count` (so equal addresses are equal words).
  private var storage: (UInt64, UInt64) = (0, 0)
  public let count: Int

  /// No address (a peer known only by text that is not one).
  public init() { count = 0 }

  /// At most 16 bytes.
  public init(_ bytes: UnsafeRawBufferPointer) {
    precondition(bytes.count <= 16, "an IP address has at most 16 bytes")
    count = bytes.count
    Swift.withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) }
  }

  public init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { IPBytes($0) } }

  public var startIndex: Int { 0 }
  public var endIndex: Int { count }

  public subscript(position: Int) -> UInt8 {
    precondition(position >= 0 && position < count, "IPBytes index out of range")
    return Swift.withUnsafeBytes(of: storage) { $0[position] }
  }

  /// The bytes in place, for the checks that read them (access rules).
  public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
    try Swift.withUnsafeBytes(of: storage) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
  }

  /// As an array, for the few callers that keep one (a key made anew).
  public var array: [UInt8] { withUnsafeBytes { Array($0) } }

  public static func == (lhs: IPBytes, rhs: IPBytes) -> Bool {
    lhs.count == rhs.count && lhs.storage.0 == rhs.storage.0 && lhs.storage.1 == rhs.storage.1
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(count)
    hasher.combine(storage.0)
    hasher.combine(storage.1)
  }

  /// `::ffff:a.b.c.d` (a dual-stack listener's IPv4 client) as its 4 bytes;
  /// any other address as it is.
  public var unmappedIPv4: IPBytes {
    guard count == 16, (0..<10).allSatisfy({ self[$0] == 0 }), self[10] == 0xff, self[11] == 0xff else {
      return self
    }
    return withUnsafeBytes { IPBytes(UnsafeRawBufferPointer(rebasing: $0[12...])) }
  }

  /// An IPv4 address as `::ffff:a.b.c.d`, the form a dual-stack IPv6 socket lists it in.
  public var mappedIPv6: IPBytes {
    precondition(count == 4, "only an IPv4 address is mapped into IPv6")
    var mapped = IPBytes(count: 16)
    Swift.withUnsafeMutableBytes(of: &mapped.storage) { out in
      (out[10], out[11]) = (0xff, 0xff)
      for index in 0..<4 { out[12 + index] = self[index] }
    }
    return mapped
  }

  /// `count` zero bytes.
  private init(count: Int) { self.count = count }

  /// 127.0.0.0/8 or ::1.
  public var isLoopback: Bool {
    count == 4 ? self[0] == 127 : count == 16 && (0..<15).allSatisfy({ self[$0] == 0 }) && self[15] == 1
  }
}

extension SocketAddress {
  /// The address alone, inline: 4 bytes for IPv4, 16 for IPv6.
  public var ipBytes: IPBytes { withAddressBytes { IPBytes($0) } }
}
