import PinEventLoop

extension ForwardSession {
  /// The upstream acquirer for this session's loop and snapshot.
  var acquirer: UpstreamAcquirer {
    UpstreamAcquirer(context: context, snapshot: snapshot, loop: loop, client: clientKey)
  }

  func acquireUpstream(exchange id: Int, _ target: ForwardTarget, poolAllowed: Bool) {
    let bodyFollows = machine.exchange?.exchange.hasBody ?? true
    acquirer.acquire(target, poolAllowed: poolAllowed, bodyFollows: bodyFollows) { [weak self] result in
      guard let self else {
        if case .success(let acquired) = result { acquired.link.close() }
        return
      }
      switch result {
      case .success(let acquired):
        let link = acquired.link
        self.run {
          $0.upstreamReady(
            UpstreamRef(link: link), exchange: id, pooled: acquired.pooled, tls: link.tls,
            protocol: link.protocolName)
        }
      case .failure(let failure):
        self.run { $0.dialFailed(failure, exchange: id) }
      }
    }
  }
}
