import COpenSSL
import Foundation
import PinTrust

#if canImport(Glibc)
  import Glibc
#endif

/// Fetches the certificate chain a TLS server presents, for `pinproxy pin
/// HOST:PORT`. A diagnostic only: it verifies nothing and never feeds a trust
/// decision. Blocking, with a timeout; not for the event loops.
public enum TLSProbe {
  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  /// - Parameter address: where to connect instead of `host:port` (a
  ///   `connectTo` mapping, curl's `--connect-to`); SNI still names `host`.
  public static func fetchChain(
    host: String, port: Int, address: (host: String, port: Int)? = nil, timeout: TimeInterval = 10
  ) throws(Failure) -> [X509Certificate] {
    let dialed = address ?? (host, port)
    let socket = try connect(host: dialed.host, port: dialed.port, timeout: timeout)
    defer { close(socket) }
    guard let context = SSL_CTX_new(TLS_client_method()) else {
      throw Failure(description: OpenSSLErrorQueue.drain())
    }
    defer { SSL_CTX_free(context) }
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
    guard let ssl = SSL_new(context) else { throw Failure(description: OpenSSLErrorQueue.drain()) }
    defer { SSL_free(ssl) }
    SSL_set_fd(ssl, socket)
    if case .dns(let name) = TrustHost(host) { _ = pp_SSL_set_tlsext_host_name(ssl, name) }
    OpenSSLErrorQueue.clear()
    guard SSL_connect(ssl) == 1 else {
      let via = address.map { " (at \($0.host):\($0.port))" } ?? ""
      throw Failure(
        description: "TLS handshake with \(host):\(port)\(via) failed: \(OpenSSLErrorQueue.drain())")
    }
    defer { SSL_shutdown(ssl) }
    // On the client side the peer chain includes the leaf.
    guard let stack = SSL_get_peer_cert_chain(ssl) else {
      throw Failure(description: "\(host):\(port) presented no certificate")
    }
    return (0..<pp_sk_X509_num(stack)).compactMap { index in
      pp_sk_X509_value(stack, index).map(X509Certificate.init(retaining:))
    }
  }

  static func connect(host: String, port: Int, timeout: TimeInterval) throws(Failure) -> Int32 {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var results: UnsafeMutablePointer<addrinfo>?
    let status = getaddrinfo(host, String(port), &hints, &results)
    guard status == 0, let results else {
      throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
    }
    defer { freeaddrinfo(results) }
    var lastError = "no address"
    var cursor: UnsafeMutablePointer<addrinfo>? = results
    while let info = cursor {
      cursor = info.pointee.ai_next
      let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
      guard fd >= 0 else { continue }
      var limit = timeval(tv_sec: Int(timeout), tv_usec: 0)
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
      if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return fd }
      lastError = String(cString: strerror(errno))
      close(fd)
    }
    throw Failure(description: "cannot connect to \(host):\(port): \(lastError)")
  }
}

/// The linked OpenSSL, for `pinproxy version`.
public enum OpenSSLLibrary {
  public static var version: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }
}
