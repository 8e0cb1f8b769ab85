import COpenSSL

/// One TLS connection as a state machine over buffers: ciphertext in from
/// the network, plaintext out to the application, and the reverse. It does
/// no I/O; the event loop moves the bytes (`TLSTransport`, its one BIO).
/// Not thread-safe: one connection's engine is used only on that
/// connection's loop.
public final class TLSEngine {
  let ssl: OpaquePointer
  private let transport = TLSTransport()
  /// A server engine that requires a client certificate: what the verify
  /// callback learnt of it (the `SSL` points at it without retaining it).
  public internal(set) var clientCertificateReport: ClientCertificateReport?
  var clientCertificateRequirement: ClientCertificateRequirement?

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
    guard let ssl = SSL_new(context) else { throw TLSEngine.currentFailure() }
    guard let bio = transport.makeBIO() else {
      SSL_free(ssl)
      throw TLSEngine.currentFailure()
    }
    // One BIO both ways: the SSL takes its one reference and frees it.
    SSL_set_bio(ssl, bio, bio)
    if server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
    self.ssl = ssl
  }

  // The SSL goes first: its BIO points at the transport's state without owning it.
  deinit { SSL_free(ssl) }

  /// Ciphertext received from the peer.
  public func receive(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { receive($0) }
  }

  /// Ciphertext received from the peer, copied into the engine's input.
  public func receive(_ bytes: UnsafeRawBufferPointer) {
    transport.keep(bytes)
  }

  /// Runs `body` with `bytes` (ciphertext just read, valid only during the
  /// call) as the engine's next input, read in place by OpenSSL; what it
  /// did not read by the end is copied and kept, as `receive` would.
  public func lending<R, E: Error>(_ bytes: UnsafeRawBufferPointer, _ body: () throws(E) -> R) throws(E) -> R
  {
    transport.lend(bytes)
    defer { transport.endLoan() }
    return try body()
  }

  /// Ciphertext to send to the peer (empty when there is none).
  public func pendingOutput() -> [UInt8] {
    var bytes: [UInt8] = []
    transport.takeOutput { bytes = Array($0) }
    return bytes
  }

  /// Hands all pending ciphertext to `send` in one piece (not called when
  /// there is none), then forgets it.
  public func takeOutput(_ send: (UnsafeRawBufferPointer) -> Void) {
    // `send` may close the socket and with it let go of this engine; the
    // transport's state is read again after it returns.
    withExtendedLifetime(self) { transport.takeOutput(send) }
  }

  public var hasPendingOutput: Bool { transport.hasOutput }

  /// Received bytes not yet read as plaintext: ciphertext not yet read by
  /// OpenSSL, or decrypted data it holds (a record read but not all
  /// returned). A record partly received is neither: it needs more input.
  public var hasBufferedInput: Bool { transport.unreadInput > 0 || SSL_pending(ssl) > 0 }

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
      do throws(Failure) {
        (initialized, progress) = try read(into: UnsafeMutableRawBufferPointer(buffer))
      } catch {
        initialized = 0
        failure = error
      }
    }
    if let failure { throw failure }
    return (bytes, progress)
  }

  /// Decrypts into `buffer` (a buffer the caller reuses) until it is full or
  /// OpenSSL has nothing more; returns the byte count and the progress
  /// (`.wantsInput`: every received byte was read, ask again with more).
  public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> (Int, Progress) {
    var total = 0
    while total < buffer.count {
      OpenSSLErrorQueue.clear()
      let count = SSL_read(ssl, buffer.baseAddress! + total, Int32(clamping: buffer.count - total))
      guard count > 0 else { return (total, try classify(count)) }
      total += Int(count)
      // Every received byte read and no decrypted byte held: another
      // SSL_read could only fail for want of input, after clearing and
      // reading the error queue. (OpenSSL reads no further than the record
      // it decrypts — read-ahead is off — so a record partly received is
      // all it can hold, and that too needs input.)
      if transport.unreadInput == 0 && SSL_pending(ssl) == 0 { return (total, .wantsInput) }
    }
    return (total, .complete)
  }

  /// Encrypts application data; with memory buffers it is always taken whole.
  public func write(_ bytes: [UInt8]) throws(Failure) {
    let result: Result<Void, Failure> = bytes.withUnsafeBytes { raw in
      do throws(Failure) {
        return .success(try write(raw))
      } catch {
        return .failure(error)
      }
    }
    try result.get()
  }

  public func write(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
    guard !bytes.isEmpty else { return }
    // Records add at most 256 bytes of header, padding and tag to their
    // 16 KiB each (RFC 8446 §5.2): the whole write in one allocation.
    transport.reserveOutput(bytes.count + (bytes.count / 16384 + 1) * 256)
    OpenSSLErrorQueue.clear()
    let written = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
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

  /// The OCSP response the server stapled to this handshake (DER), nil
  /// without one. A resumed handshake carries none (`TLSSession.staple`).
  public func stapledResponse() -> [UInt8]? {
    var data: UnsafePointer<UInt8>?
    let length = pp_SSL_get_ocsp_staple(ssl, &data)
    guard length > 0, let data else { return nil }
    return Array(UnsafeBufferPointer(start: data, count: length))
  }

  public var negotiatedProtocol: String { String(cString: SSL_get_version(ssl)) }
  public var negotiatedCipher: String {
    SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) } ?? ""
  }
  /// The protocol ALPN settled on (`h2`, `http/1.1`), nil when none was.
  public var selectedApplicationProtocol: String? {
    var data: UnsafePointer<UInt8>?
    var length: UInt32 = 0
    SSL_get0_alpn_selected(ssl, &data, &length)
    guard let data, length > 0 else { return nil }
    return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
  }
  public var sessionReused: Bool { SSL_session_reused(ssl) == 1 }
  /// The server asked for a client certificate and was sent none (a
  /// context without a client identity): a close or reset that follows
  /// before any response is that server refusing the handshake.
  public var certificateRequestUnanswered: Bool { pp_SSL_certificate_was_requested(ssl) == 1 }
  /// TLS 1.3 was negotiated.
  public var isTLS13: Bool { SSL_version(ssl) == TLS1_3_VERSION }

  /// The address of the session the connection holds now, for telling
  /// whether it changed (a TLS 1.3 ticket arriving after the handshake
  /// replaces it); never dereferenced. nil before there is one.
  public var currentSessionAddress: UnsafeRawPointer? {
    SSL_get_session(ssl).map { UnsafeRawPointer($0) }
  }

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
