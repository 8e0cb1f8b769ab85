import PinEventLoop

/// The client link: the socket (`connection`, a constant) and, after an
/// intercepted CONNECT, TLS over it (`clientTLS`). Each call goes to the
/// one in use directly; a plain client's go to the socket without loading
/// a variable, so none retains anything.
extension ForwardSession {
  /// The link as a channel, for what takes any: a lingering close, a
  /// splice, a line naming the peer.
  var client: any ByteChannel { clientTLS ?? connection }

  func writeToClient(_ bytes: UnsafeRawBufferPointer) {
    if let clientTLS { clientTLS.write(bytes) } else { connection.write(bytes) }
  }

  func writeToClient(_ bytes: [UInt8]) {
    if let clientTLS { clientTLS.write(bytes) } else { connection.write(bytes) }
  }

  func pauseClient() {
    if let clientTLS { clientTLS.pauseReading() } else { connection.pauseReading() }
  }

  func resumeClient() {
    if let clientTLS { clientTLS.resumeReading() } else { connection.resumeReading() }
  }

  /// More is queued for the client than its high watermark.
  var clientIsBackedUp: Bool { clientTLS?.isAboveHighWatermark ?? connection.isAboveHighWatermark }

  var clientIsOpen: Bool { clientTLS?.isOpen ?? connection.isOpen }

  func closeClient() {
    if let clientTLS { clientTLS.close() } else { connection.close() }
  }

  func closeClientAfterFlush() {
    if let clientTLS { clientTLS.closeAfterFlush() } else { connection.closeAfterFlush() }
  }
}
