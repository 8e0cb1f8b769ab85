import PinEventLoop

/// A forward session is the loop's record of one client connection, and
/// outlives it: when a plain HTTP connection ends, its session goes to the
/// loop's shelf whole (`ForwardStorageShelf.retiredSessions`) and serves
/// the loop's next connection (`serve`) with its timer, its clock, its
/// machine's storage and its per-loop references kept, for the same
/// listener (a session's listener is a constant). What names the
/// connection (the socket, the client, its admission ticket and budget
/// identity) and the policy in force are set anew; the machine
/// starts afresh, so no state of one connection (a verified credential, a
/// half-read head, a deadline) reaches the next.
extension ForwardSession {
  /// The session for a client socket accepted on `loop` and counted in
  /// under `entry`: a retired session nothing else holds, reopened on the
  /// socket with its admission ticket issued again, or a new one. The
  /// counts follow the socket: its close releases them at once
  /// (`Connection.onClose`, the session's `releaseAdmission`, made once).
  static func serve(
    fd: Int32, peer address: SocketAddress, loop: EventLoop, context: ProxyContext, listener: BoundListener,
    admitted entry: ClientCount, origin: consuming ClientOrigin, snapshot: RuntimeSnapshot
  ) -> ForwardSession {
    let session: ForwardSession
    let shelf = ForwardStorageShelf.onLoop(loop)
    if let retired = shelf.takeRetiredSession(of: listener) {
      retired.connection.reopen(fd: fd, address: address)
      retired.admission.reissue(entry)
      retired.reopen(origin: origin, snapshot: snapshot)
      session = retired
    } else {
      let ticket = AdmissionTicket(
        admission: context.admission, entry: entry,
        listenerOpen: context.metrics.connections(of: listener.config.name))
      session = ForwardSession(
        connection: Connection(fd: fd, address: address, loop: loop), context: context, listener: listener,
        admission: ticket, origin: origin, shelf: shelf, snapshot: snapshot)
    }
    session.connection.onClose = session.releaseAdmission
    return session
  }

  /// Serves `connection` as a session just made would, under `current`
  /// (the snapshot in force, as the accept read it). Only for a retired
  /// session, on its loop.
  private func reopen(origin: consuming ClientOrigin, snapshot current: RuntimeSnapshot) {
    loop.preconditionInLoop()
    precondition(reusable, "a retired session only")
    // A retired session served plainly: its client is its socket still.
    assert(clientTLS == nil, "a retired session reads its socket")
    // Compared in place, before the new origin moves in (no copy of the old).
    let sameClient = origin.key == self.origin.key
    let routesAlike = sameClient && self.origin.routesAlike(origin)
    self.origin = consume origin
    budgetConnection = UpstreamBudget.connectionID()
    // The acquirer goes on only for the same client under the same
    // snapshot, and only when no dial of its is under way (it would charge
    // its socket to this connection's budget).
    if !sameClient || current.generation != snapshot.generation { acquirerUnderSnapshot = nil }
    if acquirerUnderSnapshot != nil, !isKnownUniquelyReferenced(&acquirerUnderSnapshot!) {
      acquirerUnderSnapshot = nil
    }
    acquirerUnderSnapshot?.connection = budgetConnection
    if snapshot !== current { snapshot = current }
    // The router decides by the snapshot, the listener and the client's
    // address and user only: kept when none of them changed.
    let router: ForwardRouter?
    if routesAlike, machine.router.snapshot === current {
      router = nil
    } else {
      var made = ForwardRouter(snapshot: current, bound: bound, client: self.origin)
      made.adopt(machine.router.memo)
      router = made
    }
    machine.reopen(
      router: router, limits: current.httpLimits, timeouts: current.timeouts, client: self.origin.key)
    mode = .serving
    armedDeadline = nil
    connection.delegate = self
    timer.revive { [self] in timerFired() }
  }

  /// The connection ended: a session that served it plainly goes to the
  /// loop's shelf for the next one.
  func retireIfReusable() {
    guard reusable, isAtRest, let shelf else { return }
    let dropped = shelf.retiredSessions.retire(self)
    // The oldest retired session, past the shelf's bound, is let go here,
    // after the list's access ended: its deinit puts its storage back.
    _ = consume dropped
  }
}
