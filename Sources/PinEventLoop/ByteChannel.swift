/// A byte stream to one peer, confined to one loop: a plain socket
/// (`Connection`) or TLS over one (`TLSChannel` in PinProxy). Sessions,
/// the upstream HTTP codec and the splice talk only to this, so each of
/// them works the same over TLS as over TCP.
///
/// Every member is called on `loop`. Output is unbounded in the channel and
/// bounded by the caller: stop producing while `isAboveHighWatermark`, go on
/// at `channelDidDrain` (back-pressure).
public protocol ByteChannel: AnyObject {
  var loop: EventLoop { get }
  var peer: String { get }
  /// Held strongly until `channelDidClose` was delivered: whatever reads a
  /// channel lives as long as the channel is open.
  var delegate: (any ChannelDelegate)? { get set }
  var isOpen: Bool { get }
  var pendingOutputBytes: Int { get }
  var isAboveHighWatermark: Bool { get }
  /// Bytes received but not yet delivered as plaintext (TLS buffers them).
  var hasBufferedInput: Bool { get }
  /// Whether the peer sent bytes or a FIN the kernel holds unread: a syscall,
  /// asked only before an idle connection is reused.
  func hasUnreadInput() -> Bool
  func write(_ bytes: [UInt8])
  /// The same from a buffer the caller reuses: what is not sent at once is copied.
  func write(_ bytes: UnsafeRawBufferPointer)
  /// Half-close: nothing more will be written (close_notify first over TLS).
  func shutdownOutput()
  /// Closes once what is queued has been written (close_notify first over TLS).
  func closeAfterFlush()
  /// Closes now; queued output is dropped.
  func close()
  func pauseReading()
  func resumeReading()
}

/// What a channel tells its owner. Every call arrives on the channel's loop.
public protocol ChannelDelegate: AnyObject {
  /// Bytes received, in a buffer the loop reuses (the socket's read buffer,
  /// or the plaintext buffer TLS decrypts into): valid only during the call.
  /// A delegate copies what it keeps, and only that — a parser keeps a
  /// partial head, a splice nothing — so no read costs an array of its own.
  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer)
  /// The peer finished sending (FIN, or close_notify over TLS); writing may go on.
  func channelDidReadEOF(_ channel: any ByteChannel)
  /// Pending output fell below the low watermark after passing the high one.
  func channelDidDrain(_ channel: any ByteChannel)
  /// Closed, by either side or an error (a `SocketError`, or the TLS
  /// failure that broke the session). The last call.
  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?)
}
