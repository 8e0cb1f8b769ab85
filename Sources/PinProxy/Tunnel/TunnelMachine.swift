/// The protocol logic of one tunnel-listener connection, without I/O: the
/// upstream is dialled at once; until it is ready the client's bytes (and
/// its half-close) are kept, bounded, for the splice; a client silent past
/// the first-byte timer is closed. `TunnelSession` carries out the actions.
struct TunnelMachine {
  enum State {
    /// Dialling the upstream; `early` holds what the client sent meanwhile.
    case connecting(early: [UInt8], clientFinished: Bool)
    /// A `Splice` owns both channels.
    case spliced
    case closed
  }

  enum Action: Equatable {
    /// Stop reading the client: `earlyLimit` bytes wait already.
    case pauseClient
    /// Splice the ready upstream, handing it what the client sent so far.
    case splice(early: [UInt8], clientFinished: Bool)
    /// The session is over (or never began): close the dialled upstream.
    case discardUpstream
    case close
  }

  /// What a client may send before the upstream is ready; reading stops beyond it.
  static let earlyLimit = 256 * 1024

  private(set) var state = State.connecting(early: [], clientFinished: false)
  /// The client sent a byte: it may no longer be cut for silence or under overload.
  private(set) var clientSpoke = false

  /// Keeps `bytes` (valid only during the call) for the splice.
  mutating func clientRead(_ bytes: UnsafeRawBufferPointer) -> Action? {
    clientSpoke = true
    guard case .connecting(var early, let finished) = state else { return nil }
    // The state lets go of the buffer while it grows: were it still held
    // there, each append would copy everything kept so far (copy-on-write),
    // quadratic in the number of reads.
    state = .connecting(early: [], clientFinished: finished)
    early.append(contentsOf: bytes)
    state = .connecting(early: early, clientFinished: finished)
    return early.count > TunnelMachine.earlyLimit ? .pauseClient : nil
  }

  mutating func clientRead(_ bytes: [UInt8]) -> Action? {
    bytes.withUnsafeBytes { clientRead($0) }
  }

  mutating func clientEOF() {
    guard case .connecting(let early, _) = state else { return }
    state = .connecting(early: early, clientFinished: true)
  }

  mutating func upstreamReady() -> Action {
    guard case .connecting(let early, let finished) = state else { return .discardUpstream }
    state = .spliced
    return .splice(early: early, clientFinished: finished)
  }

  /// The first-byte timer fired.
  mutating func clientSilent() -> Action? { clientSpoke ? nil : close() }

  /// Graceful shutdown: a tunnel carries a protocol the proxy cannot see
  /// into, so one in use keeps going until the drain deadline ends the process.
  mutating func drain() -> Action? { clientSpoke ? nil : close() }

  /// Only a tunnel whose client has not spoken yet may be cut under overload.
  var isEvictable: Bool {
    if case .closed = state { return false }
    return !clientSpoke
  }

  mutating func close() -> Action {
    state = .closed
    return .close
  }

  mutating func clientClosed() { state = .closed }
}
