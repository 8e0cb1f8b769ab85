import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// An IPv4 or IPv6 socket address.
///
/// Kept as the `sockaddr_in` or `sockaddr_in6` itself, 28 bytes at most, in
/// plain integers: the value moves several times per accepted connection
/// (the accept, the client's origin, the connection), and a 128-byte
/// `sockaddr_storage` copied field by field cost more than the rest of
/// the accept's bookkeeping. Longer addresses (a Unix socket's path) keep
/// their family and are cut short; nothing connects or binds to one here.
public struct SocketAddress: Sendable, CustomStringConvertible {
  private var raw: (UInt64, UInt64, UInt64, UInt32) = (0, 0, 0, 0)
  public let length: socklen_t

  init(storage: sockaddr_storage, length: socklen_t) {
    var storage = storage
    let count = min(Int(length), MemoryLayout<(UInt64, UInt64, UInt64, UInt32)>.size)
    withUnsafeMutableBytes(of: &raw) { target in
      withUnsafeBytes(of: &storage) {
        target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[..<count]))
      }
    }
    self.length = socklen_t(count)
  }

  /// A numeric address and port; nil if `host` is not an IP literal.
  public init?(ip host: String, port: Int) {
    var hints = addrinfo()
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var result: UnsafeMutablePointer<addrinfo>?
    let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    guard getaddrinfo(bare, String(port), &hints, &result) == 0, let result else { return nil }
    defer { freeaddrinfo(result) }
    self.init(info: result.pointee)
  }

  init(info: addrinfo) {
    var storage = sockaddr_storage()
    let count = min(Int(info.ai_addrlen), MemoryLayout<sockaddr_storage>.size)
    withUnsafeMutableBytes(of: &storage) { raw in
      raw.copyMemory(from: UnsafeRawBufferPointer(start: info.ai_addr, count: count))
    }
    self.init(storage: storage, length: socklen_t(count))
  }

  public var family: Int32 { withUnsafeBytes(of: raw) { Int32($0.load(as: sa_family_t.self)) } }

  /// `sin_port` and `sin6_port` lie at the same offset, after the family.
  public var port: Int {
    withUnsafeBytes(of: raw) {
      Int(
        UInt16(
          bigEndian: $0.load(
            fromByteOffset: MemoryLayout<sockaddr_in>.offset(of: \.sin_port)!, as: UInt16.self)))
    }
  }

  /// The address alone, in place: 4 bytes for IPv4, 16 for IPv6 (no
  /// array made, for a check made at every accept).
  public func withAddressBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
    let (offset, count) =
      family == AF_INET6
      ? (MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)!, 16)
      : (MemoryLayout<sockaddr_in>.offset(of: \.sin_addr)!, 4)
    return withUnsafeBytes(of: raw) { body(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)])) }
  }

  /// The address alone: 4 bytes for IPv4, 16 for IPv6.
  public var addressBytes: [UInt8] { withAddressBytes { Array($0) } }

  /// `1.2.3.4:80` or `[::1]:80`, formatted from the address bytes
  /// (inet_ntop; no getnameinfo per accepted connection).
  public var description: String {
    let family = self.family
    let text = withAddressBytes { address -> String in
      withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { host in
        guard inet_ntop(family, address.baseAddress, host.baseAddress, socklen_t(host.count)) != nil else {
          return "?"
        }
        return String(cString: host.baseAddress!)
      }
    }
    return family == AF_INET6 ? "[\(text)]:\(port)" : "\(text):\(port)"
  }

  public func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var copy = raw
    return withUnsafeMutableBytes(of: &copy) { bytes in
      body(UnsafePointer(bytes.baseAddress!.bindMemory(to: sockaddr.self, capacity: 1)), length)
    }
  }
}

/// Name resolution off the event loops: getaddrinfo blocks, so it runs on a
/// global queue and the answer is delivered on the caller's loop.
public enum Resolver {
  public static func resolve(
    host: String, port: Int, on loop: EventLoop,
    _ completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void
  ) {
    if let literal = SocketAddress(ip: host, port: port) {
      loop.execute { completion(.success([literal])) }
      return
    }
    // The completion may hold a session whose last release must happen on
    // its loop: it moves there with the result and is let go of there, not
    // wherever this resolving block happens to be freed.
    let handOver = HandOver(completion)
    DispatchQueue.global().async {
      var hints = addrinfo()
      hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
      hints.ai_flags = AI_ADDRCONFIG
      var result: UnsafeMutablePointer<addrinfo>?
      let status = getaddrinfo(host, String(port), &hints, &result)
      var addresses: [SocketAddress] = []
      var cursor = result
      while let info = cursor {
        addresses.append(SocketAddress(info: info.pointee))
        cursor = info.pointee.ai_next
      }
      if let result { freeaddrinfo(result) }
      let outcome: Result<[SocketAddress], ResolveError> =
        status == 0 && !addresses.isEmpty
        ? .success(addresses)
        : .failure(ResolveError(host: host, detail: String(cString: gai_strerror(status))))
      loop.execute { handOver.take()?(outcome) }
    }
  }

  /// A closure taken out once, on the loop that calls it.
  private final class HandOver: @unchecked Sendable {
    private var completion: (@Sendable (Result<[SocketAddress], ResolveError>) -> Void)?
    init(_ completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void) {
      self.completion = completion
    }
    /// Called on the loop only, once: nothing else touches `completion`.
    func take() -> (@Sendable (Result<[SocketAddress], ResolveError>) -> Void)? {
      defer { completion = nil }
      return completion
    }
  }

  public struct ResolveError: Error, CustomStringConvertible {
    public let host: String
    public let detail: String
    public var description: String { "cannot resolve \(host): \(detail)" }
  }
}

extension SocketAddress {
  /// The addresses of this machine's network interfaces (4 or 16 bytes each).
  public static func localInterfaceAddresses() -> [[UInt8]] {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return [] }
    defer { freeifaddrs(list) }
    var result: [[UInt8]] = []
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let entry = cursor {
      if let address = entry.pointee.ifa_addr {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
          address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
            result.append(withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) })
          }
        case AF_INET6:
          address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
            result.append(withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) })
          }
        default: break
        }
      }
      cursor = entry.pointee.ifa_next
    }
    return result
  }
}
