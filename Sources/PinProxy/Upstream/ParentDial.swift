import PinEventLoop

/// Carries out a `ParentTunnel` on a socket connected to a parent proxy:
/// writes what the tunnel asks, feeds it what the parent answers, and hands
/// the socket over once the tunnel is open — or reports the parent's
/// refusal, an answer outside the protocol, a close, or the deadline (the
/// rest of `timeouts.upstreamConnect`). The owner then runs its own TLS
/// handshake and trust decision inside the tunnel, as on a direct socket.
///
/// Fail closed: the socket is handed over only after the parent's explicit
/// yes (a 2xx to CONNECT, SOCKS5 reply 0); every other ending closes it.
/// Bytes that followed the yes are refused rather than replayed: the
/// protocols pinproxy speaks inside a tunnel (TLS, or a client's own TLS
/// through a splice) begin with the client, so an origin that spoke first
/// is not one to talk to.
///
/// Confined to the connection's loop: every entry point is a channel
/// delegate call or the timer, on it.
final class ParentDial: ChannelDelegate, @unchecked Sendable {
  enum Outcome {
    /// The tunnel is open; the socket is the caller's (not reading).
    case open(Connection)
    /// The parent answered no: its status line or SOCKS5 reply.
    case refused(String)
    /// No tunnel for another reason: closed, malformed, out of time.
    case failed(String)
  }

  private let connection: Connection
  private var tunnel: ParentTunnel
  private var completion: ((Outcome) -> Void)?
  private var timer: LoopTimer?

  init(connection: Connection, tunnel: ParentTunnel, completion: @escaping (Outcome) -> Void) {
    self.connection = connection
    self.tunnel = tunnel
    self.completion = completion
  }

  /// Sends the first bytes and waits for the answer, at most `timeout` seconds.
  func start(timeout: Double) {
    connection.loop.preconditionInLoop()
    connection.delegate = self
    timer = connection.loop.schedule(after: timeout) { [self] in
      connection.loop.preconditionInLoop()
      fail(.failed("no answer within \(timeout) s"))
    }
    perform(tunnel.start())
    connection.resumeReading()
  }

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    connection.loop.preconditionInLoop()
    guard completion != nil else { return }
    perform(tunnel.received(bytes))
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    fail(.failed("it closed the connection before opening the tunnel"))
  }

  func channelDidDrain(_ channel: any ByteChannel) {}

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    fail(.failed(error.map { "the connection failed: \($0)" } ?? "it closed the connection"))
  }

  private func perform(_ step: ParentTunnel.Step) {
    switch step {
    case .send(let bytes):
      connection.write(bytes)
    case .wait:
      break
    case .established(let leftover):
      guard leftover.isEmpty else {
        return fail(.failed("bytes arrived through the tunnel before anything was sent"))
      }
      connection.pauseReading()
      finish(.open(connection))
    case .refused(let reason):
      fail(.refused(reason))
    case .malformed(let reason):
      fail(.failed(reason))
    }
  }

  private func fail(_ outcome: Outcome) {
    guard completion != nil else { return }
    connection.close()
    finish(outcome)
  }

  /// Once: the timer goes, the delegate is let go of (an open socket's next
  /// owner sets itself), and the completion runs.
  private func finish(_ outcome: Outcome) {
    guard let completion else { return }
    self.completion = nil
    timer?.cancel()
    timer = nil
    if case .open = outcome { connection.delegate = nil }
    completion(outcome)
  }
}
