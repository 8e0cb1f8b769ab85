import PinTrust

/// Forward routes by the host name a request gave, shared by every
/// connection under one snapshot: a new client connection naming a host
/// seen before skips parsing the name and looking up the rule that governs
/// it (a keep-alive connection also keeps its last decision,
/// `ForwardRouter.last`). Sound because both depend on the name and the
/// snapshot alone; a rule's dynamic pin list is read when the key is made
/// (`UpstreamRoute.identity`), never from here. A reload brings a new
/// snapshot and so a new, empty table.
///
/// Bounded: past `capacity` names the table starts again empty, so a client
/// naming endless hosts costs the parse it would have cost anyway, never memory.
final class HostRoutes: Sendable {
  enum Found: Sendable {
    case route(UpstreamRoute)
    /// The name is valid, and no rule lets it through.
    case denied(TrustHost)
    /// Not a host name at all.
    case invalid
  }

  static let capacity = 1024
  private let table = Locked<[String: Found]>([:])

  /// How many names the table holds now.
  var count: Int { table.withLock { $0.count } }

  func route(_ rawHost: String, under snapshot: RuntimeSnapshot) -> Found {
    if let found = table.withLock({ $0[rawHost] }) { return found }
    let found: Found
    if let host = TrustHost(rawHost) {
      found = UpstreamRoute(host: host, snapshot: snapshot).map(Found.route) ?? .denied(host)
    } else {
      found = .invalid
    }
    table.withLock { table in
      if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
      table[rawHost] = found
    }
    return found
  }
}
