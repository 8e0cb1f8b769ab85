/// The session as its loop's registry sees it (`DrainableSession`):
/// eviction under overload, access review after a reload, graceful
/// shutdown.
extension ForwardSession {
  /// Idle keep-alive connections go first under overload, then the ones
  /// still sending (or not yet sending) a head; never one mid-exchange.
  var evictionCandidate: EvictionCandidate? {
    loop.preconditionInLoop()
    if case .spliced(let splice) = mode {
      // A raw tunnel nobody has used for a while; the client can reconnect.
      guard splice.idleSeconds >= EvictionCandidate.idleSpliceSeconds else { return nil }
      return EvictionCandidate(tier: .idleSplice, since: splice.lastActivity)
    }
    guard machine.isAwaitingRequest else { return nil }
    return EvictionCandidate(
      tier: machine.isIdleBetweenRequests ? .idleKeepAlive : .unfinishedHead, since: machine.awaitingSince)
  }

  /// A spliced passthrough tunnel decides nothing more per request: it is
  /// closed when the reload took its client's access away (address,
  /// listener or credential). Served requests are re-checked as they come.
  func reviewAccess(under snapshot: RuntimeSnapshot) {
    loop.preconditionInLoop()
    guard case .spliced(let splice) = mode,
      let reason = snapshot.accessRevoked(
        listener: listener, client: origin, credential: machine.credential)
    else { return }
    context.logger.log(.info, "tunnel-closed", ["client": connection.peer, "reason": reason])
    splice.close()
  }

  func evict() {
    loop.preconditionInLoop()
    context.logger.log(.debug, "evicted", ["client": client.peer, "reason": "connection limit reached"])
    run { $0.closeNow() }
  }

  /// Graceful shutdown: an idle connection closes now; one with an exchange
  /// in flight finishes it and then closes.
  func drain() {
    run { $0.drain() }
  }
}
