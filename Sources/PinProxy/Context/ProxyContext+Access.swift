import PinConfig
import PinEventLoop
import PinTrust

extension ProxyContext {
  /// Whether a client at `address` may connect to `listener`, under the
  /// snapshot in force (so a reload governs the next accept). Runs on the
  /// accepting loop before the socket is read or handed on. A refusal is
  /// counted every time and logged once a minute per client (admission key).
  func admits(_ address: SocketAddress, listener: ListenerConfig) -> Bool {
    admits(address, listener: listener.name, rules: snapshot.access(for: listener).allowedClients)
  }

  /// The admin endpoint's accept check: its clients and its scrapers.
  func admitsAdmin(_ address: SocketAddress) -> Bool {
    admits(address, listener: "admin", rules: snapshot.adminAccess?.connectingClients ?? .loopback)
  }

  private func admits(_ address: SocketAddress, listener: String, rules: ClientAddressRules) -> Bool {
    let bytes = address.addressBytes
    if rules.allows(bytes) { return true }
    metrics.clientsRefused.increment([listener, "address"])
    let client = IPAddress(bytes: bytes)?.description ?? address.description
    // Keyed like admission (an IPv6 /64 is one client): a scan through one
    // prefix is one line a minute, not one per address.
    if refusedClients.shouldLog(listener: listener, client: ClientKey.of(bytes: bytes)) {
      logger.log(
        .warning, "client-refused",
        [
          "listener": listener, "client": client, "code": FailureCode.clientNotAllowed.rawValue,
          "reason": "address not in allowedClients; closed at accept (logged once a minute per client)",
        ])
    }
    return false
  }
}

extension RuntimeSnapshot {
  /// Why a spliced connection of `listener` from `peer`, accepted under an
  /// earlier snapshot, may not go on under this one (its address, its
  /// listener, or the proxy credential its CONNECT carried); nil when it
  /// may. Requests are judged by their router instead (`ForwardRouter.refusal`).
  func accessRevoked(listener: ListenerConfig, peer: String, credential: VerifiedCredential?) -> String? {
    let access = access(for: listener)
    if let denial = access.denial(of: listener, to: peerAddressBytes(peer) ?? []) { return denial }
    return access.authenticator?.inheritanceRefusal(credential)?.reason
  }
}
