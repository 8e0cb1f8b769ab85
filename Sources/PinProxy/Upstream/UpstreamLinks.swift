/// The upstream links one exchange host holds (a forward session, an h2
/// stream): the host's only strong references to them, each named by a
/// generation-checked handle (`UpstreamRef`) that its machine keeps in
/// their place. The machine's actions carry the handle; the host resolves
/// it once, when it carries the action out.
///
/// A link is held from its acquisition (`hold`) until the host lets go of
/// it: released to the pool, closed, or closed by its origin (`letGo`).
/// Letting go moves the slot's generation on, so every copy of the old
/// handle resolves to nothing from then on.
///
/// Bounded by what the host acquires at once: one link for its current
/// exchange, and briefly one more (a retry's, or a dial that answered for
/// an exchange already over, which is closed at once). Freed slots are
/// reused first. Confined to its host's loop.
struct UpstreamLinks {
  private struct Slot {
    var link: (any UpstreamLink)?
    var generation: UInt32 = 0
  }
  private var slots: [Slot] = []

  /// Holds `link` and returns its handle.
  mutating func hold(_ link: any UpstreamLink) -> UpstreamRef {
    if let free = slots.firstIndex(where: { $0.link == nil }) {
      slots[free].link = link
      return UpstreamRef(slot: UInt32(free), generation: slots[free].generation)
    }
    slots.append(Slot(link: link))
    return UpstreamRef(slot: UInt32(slots.count - 1), generation: 0)
  }

  /// The link `upstream` names while it is held; nil once let go.
  subscript(upstream: UpstreamRef) -> (any UpstreamLink)? {
    let index = Int(upstream.slot)
    guard index < slots.count, slots[index].generation == upstream.generation else { return nil }
    return slots[index].link
  }

  /// The handle of `link` while it is held (a link calling its delegate);
  /// nil for a link this host does not hold.
  func handle(of link: any UpstreamLink) -> UpstreamRef? {
    for index in slots.indices where slots[index].link === link {
      return UpstreamRef(slot: UInt32(index), generation: slots[index].generation)
    }
    return nil
  }

  /// Stops holding what `upstream` names and returns it (to be released or
  /// closed by the caller); nil when it was let go already.
  mutating func letGo(_ upstream: UpstreamRef) -> (any UpstreamLink)? {
    guard let link = self[upstream] else { return nil }
    let index = Int(upstream.slot)
    slots[index].link = nil
    slots[index].generation &+= 1
    return link
  }

  /// Stops holding `link`, closed by its origin, and returns the handle it
  /// had (for the machine to hear of the close); nil for a link this host
  /// does not hold.
  mutating func letGo(closed link: any UpstreamLink) -> UpstreamRef? {
    guard let handle = handle(of: link) else { return nil }
    _ = letGo(handle)
    return handle
  }

  /// Every link still held, let go of (the host is ending).
  mutating func letGoAll() -> [any UpstreamLink] {
    var held: [any UpstreamLink] = []
    for index in slots.indices {
      if let link = slots[index].link { held.append(link) }
      slots[index].link = nil
      slots[index].generation &+= 1
    }
    return held
  }

  var isEmpty: Bool { !slots.contains { $0.link != nil } }
}
