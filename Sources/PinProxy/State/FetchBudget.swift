import Synchronization

/// The bytes every fetch the daemon makes on behalf of a certificate (CRLs,
/// OCSP answers) may hold at once, process-wide. A fetch charges its body's
/// storage as the bytes arrive, before they are kept; past the limit it
/// fails at once with a reason that names the budget. Without it, one
/// verified leaf naming many distribution points that each serve the
/// largest CRL allowed could make the daemon buffer gigabytes within one
/// handshake.
final class FetchBudget: Sendable {
  let limit: Int
  private let held = Atomic<Int>(0)

  /// The daemon's budget: two of the largest CRLs at once, with room to spare.
  static let defaultLimit = 48 << 20

  init(limit: Int = FetchBudget.defaultLimit) { self.limit = limit }

  var heldBytes: Int { held.load(ordering: .relaxed) }

  /// Takes `bytes` more; false (and nothing taken) past the limit.
  func charge(_ bytes: Int) -> Bool {
    guard bytes > 0 else { return true }
    if held.add(bytes, ordering: .relaxed).newValue > limit {
      held.subtract(bytes, ordering: .relaxed)
      return false
    }
    return true
  }

  func release(_ bytes: Int) {
    if bytes > 0 { held.subtract(bytes, ordering: .relaxed) }
  }

  var exhaustedReason: String {
    "the revocation fetch budget (\(limit >> 20) MiB held at once by all fetches) is spent"
  }
}

/// Bytes a finished fetch still holds (its body, until decoded and kept or
/// dropped): given back when the last reference goes.
final class FetchHold: Sendable {
  private let budget: FetchBudget?
  private let bytes: Int

  init(budget: FetchBudget?, bytes: Int) {
    self.budget = budget
    self.bytes = bytes
  }

  deinit { budget?.release(bytes) }
}
