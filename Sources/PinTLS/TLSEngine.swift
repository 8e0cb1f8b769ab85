import COpenSSL

/// One TLS connection as a state machine over memory buffers: ciphertext in
/// from the network, plaintext out to the application, and the reverse. It
/// does no I/O; the event loop moves the bytes. Not thread-safe: one
/// connection's engine is used only on that connection's loop.
public final class TLSEngine {
  let ssl: OpaquePointer
  private let networkIn: OpaquePointer
  private let networkOut: OpaquePointer

  public enum Progress: Equatable {
    /// Done (handshake finished, or all plaintext written).
    case complete
    /// Needs more ciphertext from the peer.
    case wantsInput
    /// The peer closed the TLS session cleanly (close_notify).
    case closed
  }

  public struct Failure: Error, Equatable, CustomStringConvertible {
    /// OpenSSL's reason code of the first error, for classification.
    public let reason: Int32
    public let library: Int32
    public let description: String

    public init(reason: Int32, library: Int32, description: String) {
      self.reason = reason
      self.library = library
      self.description = description
    }

    /// The peer sent a TLS alert (OpenSSL reports alerts as reason 1000 + alert number).
    public var isAlertFromPeer: Bool { reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256 }
  }

  init(context: OpaquePointer, server: Bool) throws(Failure) {
    OpenSSLErrorQueue.clear()
    guard let ssl = SSL_new(context), let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem())
    else {
      throw TLSEngine.currentFailure()
    }
    // An empty input buffer means "no data yet", not end of file.
    _ = pp_BIO_set_mem_eof_return(input, -1)
    SSL_set_bio(ssl, input, output)  // the SSL owns both BIOs from here on
    if server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
    self.ssl = ssl
    networkIn = input
    networkOut = output
  }

  deinit { SSL_free(ssl) }

  /// Ciphertext received from the peer.
  public func receive(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    _ = bytes.withUnsafeBytes { BIO_write(networkIn, $0.baseAddress, Int32($0.count)) }
  }

  /// Ciphertext to send to the peer (empty when there is none).
  public func pendingOutput() -> [UInt8] {
    let pending = Int(pp_BIO_ctrl_pending(networkOut))
    guard pending > 0 else { return [] }
    var out = [UInt8](repeating: 0, count: pending)
    let read = out.withUnsafeMutableBytes { BIO_read(networkOut, $0.baseAddress, Int32(pending)) }
    return read > 0 ? Array(out[..<Int(read)]) : []
  }

  public var hasPendingOutput: Bool { pp_BIO_ctrl_pending(networkOut) > 0 }

  /// Received bytes not yet read as plaintext: ciphertext waiting in the
  /// input buffer, or decrypted data OpenSSL holds.
  public var hasBufferedInput: Bool { pp_BIO_ctrl_pending(networkIn) > 0 || SSL_pending(ssl) > 0 }

  public func handshake() throws(Failure) -> Progress {
    OpenSSLErrorQueue.clear()
    let result = SSL_do_handshake(ssl)
    if result == 1 { return .complete }
    return try classify(result)
  }

  public var isHandshakeComplete: Bool { SSL_is_init_finished(ssl) == 1 }

  /// Decrypted application data available now (up to `limit` bytes); empty
  /// with `.wantsInput` when more ciphertext is needed.
  public func read(limit: Int = 64 * 1024) throws(Failure) -> ([UInt8], Progress) {
    var progress = Progress.complete
    var failure: Failure?
    // Uninitialised storage: only the bytes SSL_read writes are kept.
    let bytes = [UInt8](unsafeUninitializedCapacity: limit) { buffer, initialized in
      var total = 0
      while total < limit {
        OpenSSLErrorQueue.clear()
        let count = SSL_read(ssl, buffer.baseAddress! + total, Int32(limit - total))
        if count > 0 {
          total += Int(count)
          continue
        }
        do {
          progress = try classify(count)
        } catch {
          failure = error as? Failure
        }
        break
      }
      initialized = total
    }
    if let failure { throw failure }
    return (bytes, progress)
  }

  /// Encrypts application data; with memory buffers it is always taken whole.
  public func write(_ bytes: [UInt8]) throws(Failure) {
    guard !bytes.isEmpty else { return }
    OpenSSLErrorQueue.clear()
    let written = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
    if written <= 0 { _ = try classify(written) }
  }

  /// Queues a close_notify; send `pendingOutput()` afterwards.
  public func close() {
    OpenSSLErrorQueue.clear()
    _ = SSL_shutdown(ssl)
    OpenSSLErrorQueue.clear()
  }

  /// The certificates the peer sent, leaf first.
  public func peerChain() -> [X509Certificate] {
    // Client side: the stack includes the leaf. (Server side it would not.)
    guard let stack = SSL_get_peer_cert_chain(ssl) else {
      return SSL_get0_peer_certificate(ssl).map { [X509Certificate(retaining: $0)] } ?? []
    }
    return (0..<pp_sk_X509_num(stack)).compactMap {
      pp_sk_X509_value(stack, $0).map(X509Certificate.init(retaining:))
    }
  }

  public var negotiatedProtocol: String { String(cString: SSL_get_version(ssl)) }
  public var negotiatedCipher: String {
    SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? ""
  }
  public var sessionReused: Bool { SSL_session_reused(ssl) == 1 }

  private func classify(_ result: Int32) throws(Failure) -> Progress {
    switch SSL_get_error(ssl, result) {
    case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantsInput
    case SSL_ERROR_ZERO_RETURN: return .closed
    default: throw TLSEngine.currentFailure()
    }
  }

  static func currentFailure() -> Failure {
    let code = ERR_peek_error()
    return Failure(
      reason: ERR_GET_REASON(code), library: ERR_GET_LIB(code), description: OpenSSLErrorQueue.drain())
  }
}
