import PinEventLoop

/// Closes a client channel after an early final response without losing
/// that response (RFC 9112 §9.6; nginx's `lingering_close`).
///
/// A client still uploading when the proxy answers (a refusal of a large
/// POST) has unread bytes in flight. Closing the socket with them unread
/// makes the kernel send RST, and the client's kernel then discards the
/// response it had received but the client had not read yet: the person
/// sees "connection reset" instead of the 502 and its reason. So the answer
/// is flushed, the write side is half-closed (close_notify first over TLS),
/// and what the client still sends is read and thrown away until it closes
/// too — or until `timeout` or `byteLimit` runs out, so a client cannot hold
/// the connection open by sending forever.
///
/// Takes the channel's delegate role; the former delegate (the session) is
/// held and told `channelDidClose`, so its clean-up runs exactly as before.
/// Confined to the channel's loop.
final class LingeringClose: ChannelDelegate, @unchecked Sendable {
  private let channel: any ByteChannel
  private var owner: (any ChannelDelegate)?
  private let byteLimit: Int
  private var discarded = 0
  private var timer: LoopTimer?

  private init(channel: any ByteChannel, owner: (any ChannelDelegate)?, byteLimit: Int) {
    self.channel = channel
    self.owner = owner
    self.byteLimit = byteLimit
  }

  /// Starts lingering on `channel`, whose queued output (the answer) is
  /// sent first. A zero `byteLimit` or `timeout` closes after the flush.
  static func start(
    _ channel: any ByteChannel, owner: (any ChannelDelegate)?, timeout: Double, byteLimit: Int
  ) {
    channel.loop.preconditionInLoop()
    guard timeout > 0, byteLimit > 0 else { return channel.closeAfterFlush() }
    let lingering = LingeringClose(channel: channel, owner: owner, byteLimit: byteLimit)
    channel.delegate = lingering
    channel.shutdownOutput()
    channel.resumeReading()
    lingering.timer = channel.loop.schedule(after: timeout) { [weak lingering] in
      lingering?.finish(force: true)
    }
  }

  /// The client closed or sent too much: close once the answer is out. At
  /// the deadline close regardless — a client that reads nothing must not
  /// keep the connection (and its slot) by leaving the answer unflushed.
  private func finish(force: Bool = false) {
    channel.loop.preconditionInLoop()
    timer?.cancel()
    if force { channel.close() } else { channel.closeAfterFlush() }
  }

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    discard(bytes.count)
  }

  private func discard(_ count: Int) {
    discarded += count
    if discarded >= byteLimit { finish() }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) { finish() }

  func channelDidDrain(_ channel: any ByteChannel) {}

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    timer?.cancel()
    let former = owner
    owner = nil
    former?.channelDidClose(channel, error: error)
  }
}
