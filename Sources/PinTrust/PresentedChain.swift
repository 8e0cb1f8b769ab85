/// The certificates a server sent, leaf first, as DER bytes: the input of a
/// trust decision and the key of the fingerprint cache.
///
/// Equality compares every byte of every certificate. Hashing reads only each
/// certificate's length and the last 32 bytes (inside its signature, which is
/// what differs between any two certificates), so a lookup does not hash kilobytes;
/// the full comparison on a hit means a hash collision can never turn into a
/// false match.
public struct PresentedChain: Sendable, Hashable {
  public let certificates: [[UInt8]]

  public init(_ certificates: [[UInt8]]) { self.certificates = certificates }

  public var isEmpty: Bool { certificates.isEmpty }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(certificates.count)
    for der in certificates {
      hasher.combine(der.count)
      der.withUnsafeBytes { raw in
        hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw.suffix(32)))
      }
    }
  }

  public static func == (lhs: PresentedChain, rhs: PresentedChain) -> Bool {
    guard lhs.certificates.count == rhs.certificates.count else { return false }
    for index in lhs.certificates.indices where !bytesEqual(lhs.certificates[index], rhs.certificates[index])
    {
      return false
    }
    return true
  }

  /// Same-buffer arrays return at once; otherwise the tails (where two
  /// certificates differ) are compared first, then every byte, 64 at a time.
  static func bytesEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    return lhs.withUnsafeBytes { a in
      rhs.withUnsafeBytes { b in
        if a.baseAddress == b.baseAddress { return true }
        let count = a.count
        func word(_ buffer: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
          buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        }
        if count >= 8 && word(a, count - 8) != word(b, count - 8) { return false }
        var offset = 0
        // 64 bytes a step as one vector compare: a certificate is 1–2 KB,
        // and a cache hit compares the whole presented chain.
        while offset + 64 <= count {
          let left = a.loadUnaligned(fromByteOffset: offset, as: SIMD8<UInt64>.self)
          let right = b.loadUnaligned(fromByteOffset: offset, as: SIMD8<UInt64>.self)
          if any(left .!= right) { return false }
          offset += 64
        }
        while offset + 32 <= count {
          let difference =
            (word(a, offset) ^ word(b, offset)) | (word(a, offset + 8) ^ word(b, offset + 8))
            | (word(a, offset + 16) ^ word(b, offset + 16)) | (word(a, offset + 24) ^ word(b, offset + 24))
          if difference != 0 { return false }
          offset += 32
        }
        while offset < count {
          if a[offset] != b[offset] { return false }
          offset += 1
        }
        return true
      }
    }
  }
}
