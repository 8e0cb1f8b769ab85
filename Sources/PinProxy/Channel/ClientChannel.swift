import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// The client side of a session: the socket itself, or TLS terminated over it
/// (an intercepted CONNECT). Sessions talk to this, not to the socket.
protocol ClientChannel: AnyObject {
  var peer: String { get }
  var isAboveHighWatermark: Bool { get }
  func write(_ bytes: [UInt8])
  /// Half-close: nothing more will be written (close_notify first over TLS).
  func shutdownOutput()
  func closeAfterFlush()
  func close()
  func pauseReading()
  func resumeReading()
}

/// What a session hears from its client channel (on the loop).
protocol ClientChannelDelegate: AnyObject {
  func clientDidRead(_ bytes: [UInt8])
  func clientDidReadEOF()
  func clientDidDrain()
  func clientDidClose()
}

extension Connection: ClientChannel {}

/// TLS terminated towards the client with a leaf minted for the CONNECT host.
/// The handshake is bounded by a timer, and a client whose SNI names another
/// host than the CONNECT line is refused: the certificate it would get was
/// minted for the CONNECT host, and serving it under another name would let
/// one CONNECT reach a second host's policy.
///
/// Confined to its loop. Holds its session strongly until closed.
final class TLSServerChannel: ConnectionDelegate, ClientChannel, @unchecked Sendable {
  enum State {
    case handshaking(LoopTimer)
    case open
    case closed
  }

  let connection: Connection
  let engine: TLSEngine
  let expectedHost: TrustHost
  var owner: (any ClientChannelDelegate)?
  let onRefused: (String) -> Void
  private var state: State = .closed

  init(
    connection: Connection, engine: TLSEngine, expectedHost: TrustHost, onRefused: @escaping (String) -> Void
  ) {
    self.connection = connection
    self.engine = engine
    self.expectedHost = expectedHost
    self.onRefused = onRefused
  }

  /// Terminates the client's TLS on `connection` for `host`: the channel
  /// becomes the socket's delegate and reports to `owner`; a refused
  /// handshake is logged as such.
  static func takeOver(
    _ connection: Connection, engine: TLSEngine, host: TrustHost, target: String, logger: ProxyLogger,
    owner: any ClientChannelDelegate, early: [UInt8], timeout: Double
  ) -> TLSServerChannel {
    let peer = connection.peer
    let channel = TLSServerChannel(connection: connection, engine: engine, expectedHost: host) { reason in
      logger.log(
        .warning, "refused", ["client": peer, "target": target, "code": "handshake-failed", "reason": reason])
    }
    channel.owner = owner
    channel.start(early: early, timeout: timeout)
    return channel
  }

  var peer: String { connection.peer }
  var isAboveHighWatermark: Bool { connection.isAboveHighWatermark }

  /// Takes over the socket; `early` are bytes already read after the CONNECT head.
  func start(early: [UInt8], timeout: Double) {
    connection.delegate = self
    state = .handshaking(
      connection.loop.schedule(after: timeout) { [weak self] in
        self?.refuse("client TLS handshake took longer than \(timeout) s")
      })
    connection.resumeReading()
    if !early.isEmpty { connection(connection, didRead: early) }
  }

  func write(_ bytes: [UInt8]) {
    guard case .open = state else { return }
    do {
      try engine.write(bytes)
    } catch {
      return refuse("TLS write failed: \(error.description)")
    }
    flush()
  }

  func shutdownOutput() {
    if case .open = state {
      engine.close()
      flush()
    }
    connection.shutdownOutput()
  }

  func closeAfterFlush() {
    if case .open = state {
      engine.close()
      flush()
    }
    state = .closed
    connection.closeAfterFlush()
  }

  func close() {
    state = .closed
    connection.close()
  }

  func pauseReading() { connection.pauseReading() }
  func resumeReading() { connection.resumeReading() }

  private func flush() {
    let output = engine.pendingOutput()
    if !output.isEmpty { connection.write(output) }
  }

  private func refuse(_ reason: String) {
    if case .handshaking(let timer) = state { timer.cancel() }
    guard connection.state == .open else { return }
    onRefused(reason)
    flush()
    state = .closed
    connection.closeAfterFlush()
  }

  // MARK: ConnectionDelegate

  func connection(_ connection: Connection, didRead bytes: [UInt8]) {
    engine.receive(bytes)
    if case .handshaking(let timer) = state {
      let progress: TLSEngine.Progress
      do {
        progress = try engine.handshake()
      } catch {
        flush()
        return refuse("client TLS handshake failed: \(error.description)")
      }
      // The name is known once the ClientHello is read: refuse before the
      // server's flight (and the minted leaf) is sent.
      if let name = engine.requestedServerName, TrustHost(name) != expectedHost {
        timer.cancel()
        state = .closed
        onRefused("client asked for \(name) (SNI) inside a CONNECT to \(expectedHost)")
        return connection.close()
      }
      flush()
      guard progress == .complete else { return }
      timer.cancel()
      state = .open
    }
    guard case .open = state else { return }
    do {
      while true {
        let (plaintext, progress) = try engine.read()
        flush()
        if !plaintext.isEmpty { owner?.clientDidRead(plaintext) }
        if progress == .closed { return owner?.clientDidReadEOF() ?? () }
        if plaintext.isEmpty { return }
        if case .open = state {} else { return }
      }
    } catch {
      close()
    }
  }

  func connectionDidReadEOF(_ connection: Connection) { owner?.clientDidReadEOF() }
  func connectionDidDrain(_ connection: Connection) { owner?.clientDidDrain() }

  func connectionDidClose(_ connection: Connection, error: SocketError?) {
    if case .handshaking(let timer) = state { timer.cancel() }
    state = .closed
    let owner = self.owner
    self.owner = nil
    owner?.clientDidClose()
  }
}
