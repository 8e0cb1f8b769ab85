import PinEventLoop

extension ForwardSession {
  /// The upstream acquirer for this session's loop and snapshot, taken at
  /// the first request under a snapshot, not for every request: handed on
  /// by the loop's last session of the same client under the same snapshot
  /// (`ForwardStorageShelf.acquirerMemo`) and re-labelled as this
  /// connection's for the budget, or else made.
  var acquirer: UpstreamAcquirer {
    if let acquirerUnderSnapshot { return acquirerUnderSnapshot }
    let made: UpstreamAcquirer
    if let kept = shelf?.takeAcquirer(client: clientKey, generation: snapshot.generation) {
      kept.connection = budgetConnection
      made = kept
    } else {
      made = UpstreamAcquirer(
        context: context, snapshot: snapshot, loop: loop, pool: pool, client: clientKey,
        connection: budgetConnection)
    }
    acquirerUnderSnapshot = made
    return made
  }

  /// For the request the machine is serving; its answer is recognised by
  /// the exchange's id (a later exchange ignores it).
  func acquireUpstream(poolAllowed: Bool) {
    // Read in place: binding `machine.exchange?.exchange` copies the whole
    // exchange machine to read three fields.
    guard
      let (id, target, bodyFollows) = machine.inExchange({
        ($0.exchange.id, $0.exchange.target, $0.exchange.hasBody)
      })
    else { return }
    let acquirer = self.acquirer
    // A pooled connection is taken at once, with no closure to allocate.
    if poolAllowed {
      switch acquirer.takePooled(target, bodyFollows: bodyFollows) {
      case .taken(let connection): return upstreamAcquired(connection, pooled: true, exchange: id)
      case .refused: return run { $0.dialFailed(acquirer.refusal, exchange: id) }
      case .noneIdle: break
      }
    }
    // The session is held until the acquisition answers (a dial is bounded
    // by its timeouts); a session whose client left meanwhile closes the
    // link it gets, since its machine no longer serves that exchange.
    acquirer.acquire(target, poolAllowed: poolAllowed, bodyFollows: bodyFollows) { [self] result in
      acquired(result, exchange: id)
    }
  }

  private func acquired(
    _ result: Result<(link: any UpstreamLink, pooled: Bool), ProxyFailure>, exchange id: Int
  ) {
    switch result {
    case .success(let acquired): upstreamAcquired(acquired.link, pooled: acquired.pooled, exchange: id)
    case .failure(let failure): run { $0.dialFailed(failure, exchange: id) }
    }
  }

  private func upstreamAcquired(_ link: any UpstreamLink, pooled: Bool, exchange id: Int) {
    // Held from here until released or closed; the machine keeps the handle.
    let handle = upstreams.hold(link)
    run {
      $0.upstreamReady(
        handle, exchange: id, pooled: pooled, tls: link.tls, protocol: link.protocolName,
        responseTimeout: snapshot.timeouts.upstreamResponse)
    }
  }
}
