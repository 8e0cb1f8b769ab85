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
    for index in lhs.certificates.indices where !bytesEqual(lhs.certificates[index], rhs.certificates[index]) {
      return false
    }
    return true
  }

  /// Word-at-a-time comparison; same-buffer arrays return at once.
  static func bytesEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    return lhs.withUnsafeBytes { a in
      rhs.withUnsafeBytes { b in
        if a.baseAddress == b.baseAddress { return true }
        let count = a.count
        var offset = 0
        while offset + 8 <= count {
          if a.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            != b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
          {
            return false
          }
          offset += 8
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
