import PinConfig

/// The configuration a listening socket was bound with, shared by every
/// session it accepts and every router they make: a session or router
/// holds one reference instead of a copy of each field (a listener's
/// configuration is some twenty fields, a dozen of them references that a
/// copy retains and a destroy releases, per connection).
final class BoundListener: Sendable {
  let config: ListenerConfig

  init(_ config: ListenerConfig) { self.config = config }
}
