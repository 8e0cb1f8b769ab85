import PinTLS
import PinTrust

/// TLS sessions for resumption, keyed like connections so a session is never
/// resumed under another host, port or policy generation. Shared by all loops.
final class TLSSessionCache: Sendable {
  private let sessions = Locked<[UpstreamKey: TLSSession]>([:])
  private let capacity: Int

  init(capacity: Int = 4096) { self.capacity = capacity }

  func store(_ session: TLSSession, for key: UpstreamKey) {
    sessions.withLock { sessions in
      if sessions.count >= capacity, sessions[key] == nil, let victim = sessions.keys.first {
        sessions[victim] = nil
      }
      sessions[key] = session
    }
  }

  func session(for key: UpstreamKey) -> TLSSession? { sessions.withLock { $0[key] } }

  func removeAll() { sessions.withLock { $0.removeAll() } }
}
