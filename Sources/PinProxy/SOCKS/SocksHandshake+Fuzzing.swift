import PinTrust

/// The SOCKS5 handshake decoder as the fuzzer drives it (Fuzz/Sources/
/// FuzzSOCKS): the input's first byte says whether a password is required
/// and where to split the rest; the rest is fed in two pieces and, again,
/// whole. Properties: the two feedings take the same steps; nothing is
/// buffered past the bound; every reply is well formed (a method choice of
/// 2 bytes, an RFC 1929 status of 2, a request reply of 10); a CONNECT
/// comes only after the method (and, when required, an accepted
/// credential), for a valid host and a port from 1 to 65535. The
/// handshake counts as unfinished (evictable, `isUnfinished`) exactly until
/// it hands out its CONNECT or fails.
@_spi(Fuzzing) public enum SocksFuzzing {
  /// Returns the property that failed, or nil.
  public static func run(_ bytes: [UInt8]) -> String? {
    guard let control = bytes.first else { return nil }
    let input = Array(bytes.dropFirst())
    let requiresPassword = control & 1 == 1
    let split = input.isEmpty ? 0 : Int(control >> 1) % (input.count + 1)
    let pieces = [Array(input[..<split]), Array(input[split...])]
    let stepwise = steps(pieces, requiresPassword: requiresPassword, acceptPassword: control & 2 == 2)
    let whole = steps([input], requiresPassword: requiresPassword, acceptPassword: control & 2 == 2)
    if let failure = stepwise.failure ?? whole.failure { return failure }
    return stepwise.steps == whole.steps ? nil : "split and whole input took different steps"
  }

  private static func steps(_ pieces: [[UInt8]], requiresPassword: Bool, acceptPassword: Bool) -> (
    steps: [SocksHandshake.Step], failure: String?
  ) {
    var handshake = SocksHandshake(requiresPassword: requiresPassword)
    var taken: [SocksHandshake.Step] = []
    var methodChosen = false
    var credentialAccepted = false
    // After the CONNECT, bytes belong to the tunnel: they join its early bytes.
    var connected: (index: Int, host: TrustHost, port: Int, early: [UInt8])?
    for piece in pieces {
      if connected != nil {
        connected!.early += piece
        continue
      }
      // A failed handshake reads nothing more.
      if !handshake.isUnfinished { continue }
      var step = piece.withUnsafeBytes { handshake.feed($0) }
      while true {
        let over: Bool
        switch step {
        case .connect, .fail: over = true
        default: over = false
        }
        if handshake.isUnfinished == over {
          return (taken, "isUnfinished is \(handshake.isUnfinished) after \(step)")
        }
        switch step {
        case .more:
          break
        case .reply(let reply):
          taken.append(step)
          if reply.count == 2 && reply[0] == 5 {
            methodChosen = true
          } else if reply == [1, 0] {
            credentialAccepted = true
          } else {
            return (taken, "a malformed reply \(reply)")
          }
          step = handshake.step()
          continue
        case .check:
          taken.append(step)
          guard requiresPassword, methodChosen else { return (taken, "a credential asked for out of turn") }
          step = handshake.credentialChecked(acceptPassword, reason: "fuzz")
          continue
        case .connect(let host, let port, let early):
          connected = (taken.count, host, port, early)
          taken.append(step)
          guard methodChosen, !requiresPassword || credentialAccepted else {
            return (taken, "a CONNECT before the handshake allowed it")
          }
          guard (1...65535).contains(port), TrustHost(host.description) != nil else {
            return (taken, "a CONNECT to \(host):\(port)")
          }
        case .fail(let reply, _):
          taken.append(step)
          if let reply, ![2, 10].contains(reply.count) {
            return (taken, "a malformed failure reply \(reply)")
          }
        }
        break
      }
    }
    if let connected {
      taken[connected.index] = .connect(host: connected.host, port: connected.port, early: connected.early)
    }
    return (taken, nil)
  }
}
