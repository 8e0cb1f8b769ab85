import Dispatch
import PinEventLoop

/// Raw bytes both ways between a client channel and an upstream channel:
/// passthrough CONNECT and tunnel listeners. Half-close passes through (a
/// FIN or close_notify from one side becomes a half-close towards the
/// other); each side is read only while the other keeps up (back-pressure);
/// silence both ways for `idleLimit` closes both.
///
/// Confined to the channels' loop (`loop.queue`): it is the delegate of
/// both channels and every entry point is one of their calls or a timer on
/// that queue. Each channel holds the splice strongly until it closed.
final class Splice: ChannelDelegate, @unchecked Sendable {
  let client: any ByteChannel
  /// The upstream channel and what its dial learnt: whether giving it up
  /// ends a TLS session (kept resumable) or a plain socket.
  private let dialed: DialedUpstream
  var upstream: any ByteChannel { dialed.channel }
  private var idle: IdleWatch?
  private var clientDone = false
  private var upstreamDone = false
  /// Why the upstream side broke, if it did: reported at the end.
  private var upstreamError: (any Error)?
  private var onEnd: ((_ upstreamError: (any Error)?) -> Void)?
  /// Called once, at the client's first bytes (a tunnel's first-byte timer).
  var onFirstClientBytes: (() -> Void)?
  /// Until it has judged the client's ClientHello, nothing the client sends
  /// reaches the upstream (a passthrough tunnel carries only the host it
  /// was opened for).
  private var gate: Gate?

  /// What a splice waits for before relaying: the ClientHello's name,
  /// judged by `refusal` (nil: relay; else why not), within `deadline` seconds.
  struct Gate {
    var reader = ClientHelloName()
    let refusal: (ClientHelloName.Verdict) -> String?
    /// Told why the tunnel was closed unopened (the log line, the metric).
    let refused: (String) -> Void
    let deadline: Double
    var timer: LoopTimer?

    init(
      deadline: Double, refusal: @escaping (ClientHelloName.Verdict) -> String?,
      refused: @escaping (String) -> Void
    ) {
      self.deadline = deadline
      self.refusal = refusal
      self.refused = refused
    }
  }

  /// - Parameters:
  ///   - early: client bytes read before the upstream was ready.
  ///   - clientFinished: the client already half-closed.
  ///   - onEnd: called once, when the client channel has closed (the
  ///     upstream is closed by then too), with the error that broke the
  ///     upstream side if one did.
  ///   - gate: judge the client's ClientHello before relaying anything it sends.
  init(
    client: any ByteChannel, upstream dialed: DialedUpstream, idleLimit: Double, early: [UInt8] = [],
    clientFinished: Bool = false, gate: Gate? = nil, onEnd: @escaping (_ upstreamError: (any Error)?) -> Void
  ) {
    self.client = client
    self.dialed = dialed
    self.onEnd = onEnd
    self.gate = gate
    clientDone = clientFinished
    idle = IdleWatch(loop: client.loop, limit: idleLimit) { [weak self] in self?.close() }
    client.delegate = self
    upstream.delegate = self
    if let gate {
      let deadline = gate.deadline
      self.gate?.timer = client.loop.schedule(after: deadline) { [weak self] in
        self?.closeUnopened("no complete ClientHello within \(deadline) s")
      }
      if !early.isEmpty {
        early.withUnsafeBytes { judge($0) }
      }
      // A client that finished sending before naming its host never will.
      if clientFinished && self.gate != nil {
        closeUnopened("the client closed before its ClientHello was complete")
      }
    } else {
      if !early.isEmpty { upstream.write(early) }
      if clientFinished { upstream.shutdownOutput() }
    }
    client.resumeReading()
    upstream.resumeReading()
  }

  /// Feeds the gate; once it has decided, the whole ClientHello (and what
  /// came with it) goes upstream, or the tunnel closes unopened.
  private func judge(_ bytes: UnsafeRawBufferPointer) {
    guard var gate else { return }
    let verdict = gate.reader.feed(bytes)
    self.gate = gate
    guard verdict != .more else { return }
    if let reason = gate.refusal(verdict) { return closeUnopened(reason) }
    gate.timer?.cancel()
    self.gate = nil
    upstream.write(gate.reader.received)
  }

  /// The tunnel is not opened after all: the client gets a fatal TLS alert
  /// (unrecognized_name, RFC 6066 §3), the upstream nothing of the client's.
  private func closeUnopened(_ reason: String) {
    guard let gate else { return }
    self.gate = nil
    gate.timer?.cancel()
    gate.refused(reason)
    let unrecognizedName: UInt8 = 112
    client.write([21, 3, 3, 0, 2, 2, unrecognizedName])
    idle?.cancel()
    dialed.closeKeepingSession()
    client.closeAfterFlush()
  }

  var loop: EventLoop { client.loop }
  /// When a byte last went either way (uptime nanoseconds).
  var lastActivity: UInt64 {
    loop.preconditionInLoop()
    return idle?.lastActivity ?? 0
  }
  var idleSeconds: Double {
    loop.preconditionInLoop()
    return idle?.idleSeconds ?? 0
  }

  /// Closes both sides now.
  func close() {
    loop.preconditionInLoop()
    idle?.cancel()
    dialed.closeKeepingSession()
    client.close()
  }

  private func other(_ channel: any ByteChannel) -> any ByteChannel {
    channel === client ? upstream : client
  }

  // MARK: ChannelDelegate (both sides)

  /// Bytes go from the loop's read buffer straight to the other side: a
  /// socket writes them at once (copying only what it could not send), TLS
  /// encrypts them; no array in between.
  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    idle?.touch()
    if channel === client, let first = onFirstClientBytes {
      onFirstClientBytes = nil
      first()
    }
    if channel === client, gate != nil { return judge(bytes) }
    let destination = other(channel)
    destination.write(bytes)
    if destination.isAboveHighWatermark { channel.pauseReading() }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    if channel === client, gate != nil {
      return closeUnopened("the client closed before its ClientHello was complete")
    }
    if channel === client { clientDone = true } else { upstreamDone = true }
    other(channel).shutdownOutput()
    if clientDone && upstreamDone {
      idle?.cancel()
      upstream.closeAfterFlush()
      client.closeAfterFlush()
    }
  }

  func channelDidDrain(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    other(channel).resumeReading()
  }

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    if channel === client {
      gate?.timer?.cancel()
      gate = nil
    }
    if channel === upstream {
      upstreamError = error
      // What the client was sent still reaches it; then it closes too.
      return client.closeAfterFlush()
    }
    idle?.cancel()
    idle = nil
    dialed.closeKeepingSession()
    // Dropped once called: the closure holds the session, which holds this splice.
    let onEnd = self.onEnd
    self.onEnd = nil
    onFirstClientBytes = nil
    onEnd?(upstreamError)
  }
}
