import PinConfig
import PinTrust

/// The configuration a listening socket was bound with, shared by every
/// session it accepts and every router they make: a session or router
/// holds one reference instead of a copy of each field (a listener's
/// configuration is some twenty fields, a dozen of them references that a
/// copy retains and a destroy releases, per connection).
final class BoundListener: Sendable {
  let config: ListenerConfig
  /// The access last found, with the generation it was found under.
  private let found = Locked<(generation: UInt64, access: ListenerAccess)?>(nil)

  init(_ config: ListenerConfig) { self.config = config }

  /// Who may use this listener under `snapshot`: looked up by name once per
  /// generation, not three times per connection (the accept filter, the
  /// user check, the router). Sound because a snapshot's access tables are
  /// fixed, and every snapshot installed has a generation of its own (a
  /// reload's is the running one's plus one).
  func access(under snapshot: RuntimeSnapshot) -> ListenerAccess {
    let generation = snapshot.generation
    if let hit = found.withLock({ $0?.generation == generation ? $0?.access : nil }) { return hit }
    let access = snapshot.access(for: config)
    found.withLock { $0 = (generation, access) }
    return access
  }
}
