import Glibc
import PinConfig
import PinEventLoop
import PinTrust

extension ProxyContext {
  /// The admin endpoint's accept check: its clients and its scrapers.
  func admitsAdmin(_ address: SocketAddress) -> Bool {
    admits(address, listener: "admin", rules: snapshot.adminAccess?.connectingClients ?? .loopback)
  }

  /// Whether `rules` let a client at `address` connect to `listener`; a
  /// refusal is counted, and logged once a minute per client.
  func admits(_ address: SocketAddress, listener: String, rules: ClientAddressRules) -> Bool {
    if address.withAddressBytes({ rules.allows($0) }) { return true }
    let bytes = address.addressBytes
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
  func accessRevoked(listener: ListenerConfig, client: ClientOrigin, credential: VerifiedCredential?)
    -> String?
  {
    let access = access(for: listener)
    if let denial = access.denial(ofListener: listener.name, to: client.address, local: client.local) {
      return denial
    }
    return access.authenticator?.inheritanceRefusal(credential)?.reason
  }
}

extension ProxyContext {
  /// The owner of a client's socket when the client is on this host. The
  /// kernel is asked for every accepted peer, whatever its address: a
  /// process may bind its source to any address of this host (or, behind a
  /// `local` route, to any address of a whole range) and connect to any
  /// other, so an address that looks remote proves nothing. Only the
  /// kernel's "no such socket here" makes a peer remote; a socket it knows
  /// without an owner, or a peer on a loopback address or on the very
  /// address it connected to whose socket it cannot find, is a local peer
  /// of unknown user (`allowedUsers` refuses it: fail closed). Runs on the
  /// accepting loop, before anything is read: one sock_diag request and
  /// answer (`SockDiagSocket`, a few µs; two for an IPv4 peer that is not a
  /// local IPv4 socket); the program is looked up off the loop, and at once
  /// only when the access log will name it. `here`: the socket's own
  /// address when the caller knows it (a listener on one address accepts
  /// there only), saving a `getsockname` per connection.
  func localPeer(
    fd: Int32, peer: SocketAddress, peerBytes: IPBytes? = nil, here known: SocketAddress? = nil,
    loop: EventLoop
  ) -> LocalPeer? {
    #if PINPROXY_NO_PEER_IDENTITY
      // The baseline of Benchmarks/identity-overhead.sh: every peer remote.
      return nil
    #else
      // Inline values, no array made: this runs at every accept.
      let remote = (peerBytes ?? peer.ipBytes).unmappedIPv4
      let loopback = remote.isLoopback
      guard let here = known ?? SocketAddress.local(of: fd) else {
        return loopback ? LocalPeer(owner: nil) : nil
      }
      // Not a TCP connection at all (a socket pair handed in by a test).
      guard here.family == AF_INET || here.family == AF_INET6 else { return nil }
      let local = here.ipBytes.unmappedIPv4
      guard local.count == remote.count else { return loopback ? LocalPeer(owner: nil) : nil }
      // The client's socket: its source is our peer, its destination us.
      // An IPv4 client may hold a dual-stack IPv6 socket (Java's default),
      // listed with v4-mapped addresses: asked for second.
      var tuple = SocketTuple(
        source: remote, sourcePort: UInt16(peer.port), destination: local, destinationPort: UInt16(here.port))
      guard let diag = loopState(for: loop).sockDiag else {
        return loopback || local == remote ? LocalPeer(owner: nil, tuple: tuple) : nil
      }
      var answer = diag.lookUp(tuple)
      if answer == .absent, remote.count == 4 {
        let mapped = SocketTuple(
          source: remote.mappedIPv6, sourcePort: tuple.sourcePort, destination: local.mappedIPv6,
          destinationPort: tuple.destinationPort)
        answer = diag.lookUp(mapped)
        if answer != .absent { tuple = mapped }
      }
      let found: LocalPeer
      switch answer {
      case .owner(let owner): found = LocalPeer(owner: owner, tuple: tuple)
      case .unknown, .unrelated: found = LocalPeer(owner: nil, tuple: tuple)
      case .absent:
        guard loopback || local == remote else { return nil }
        found = LocalPeer(owner: nil, tuple: tuple)
      }
      if logger.access { found.lookUp() }
      return found
    #endif
  }

  /// `allowedUsers` at accept: a local client whose user the listener does
  /// not list (or whose owner the kernel did not tell) may not connect; its
  /// socket `fd` is closed unread. Counted every time, logged once a minute
  /// per listener and user; the logged one is closed once its program is
  /// known (the client, waiting for an answer, is still there to be found),
  /// so at most that many sockets wait a moment.
  /// `access`: the listener's rules under the snapshot in force, read once by the accept.
  func admitsUser(
    _ local: LocalPeer, fd: Int32, peer: SocketAddress, listener: String, access: ListenerAccess
  ) -> Bool {
    if access.admitsUser(local) { return true }
    metrics.clientsRefused.increment([listener, "user"])
    let user = local.uid.map(String.init) ?? "unknown"
    guard refusedClients.shouldLog(listener: listener, client: "uid " + user) else {
      _ = Glibc.close(fd)
      return false
    }
    local.whenResolved(urgent: true) { [logger] in
      _ = Glibc.close(fd)
      logger.log(
        .warning, "client-refused",
        [
          "listener": listener, "client": peer.description, "client_user": local.user,
          "client_program": local.program, "code": FailureCode.clientNotAllowed.rawValue,
          "reason": "user not in allowedUsers; closed at accept (logged once a minute per user)",
        ])
    }
    return false
  }
}
