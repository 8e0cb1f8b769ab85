/// Records a loop keeps whole after their connection ended, to serve its
/// next connections (nginx keeps its freed `ngx_connection_t`s on a free
/// list the same way): a new connection then makes no session object, no
/// timer, no clock and no machine storage, and releases none of them when
/// it ends.
///
/// A record is handed out again only when the list holds the one strong
/// reference to it (`isKnownUniquelyReferenced`): a callback still
/// pending, a link still naming it as its delegate or a test keeping it
/// makes it wait on the list, so nothing that belonged to the old
/// connection can reach the new one. References the check does not see
/// (weak or unowned ones) must never have been taken: a record that took
/// one is not retired at all (`ForwardSession.reusable`).
///
/// Bounded: past `capacity` the oldest is let go, so a burst of closing
/// connections leaves no more than that behind. Confined to one loop.
struct RetiredRecords<Record: AnyObject> {
  private var records: [Record] = []
  let capacity: Int

  init(capacity: Int) { self.capacity = capacity }

  var count: Int { records.count }

  /// Keeps `record`. Returns the oldest one when that exceeded the bound:
  /// the caller lets go of it after this call, outside any access to the
  /// list (its deinit may touch the loop's other spares).
  mutating func retire(_ record: Record) -> Record? {
    records.append(record)
    guard records.count > capacity else { return nil }
    return records.removeFirst()
  }

  /// The most recently retired record that nothing else holds and that
  /// `fits`, taken off the list; nil when there is none.
  mutating func takeUnheld(where fits: (Record) -> Bool = { _ in true }) -> Record? {
    var index = records.count
    while index > 0 {
      index -= 1
      if fits(records[index]), isKnownUniquelyReferenced(&records[index]) { return records.remove(at: index) }
    }
    return nil
  }
}
