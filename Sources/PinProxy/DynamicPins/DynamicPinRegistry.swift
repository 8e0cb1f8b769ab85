import Foundation
import PinTrust

/// Every rule's pin list store, by list identity (`DynamicPinSpec.id`). It
/// outlives configuration snapshots: a reload that keeps a rule's list
/// keeps its store, its list and its version.
public final class DynamicPinRegistry: Sendable {
  private let stores = Locked<[String: DynamicPinStore]>([:])

  public init() {}

  /// The store for `spec`: the existing one for the same list, else a new
  /// one loaded from the state directory (or the fallback).
  func store(for spec: DynamicPinSpec, at time: Date, warn: (String) -> Void) -> DynamicPinStore {
    if let existing = stores.withLock({ $0[spec.id] }) { return existing }
    let store = DynamicPinStore(spec: spec, at: time, warn: warn)
    return stores.withLock { stores in
      if let raced = stores[spec.id] { return raced }
      stores[spec.id] = store
      return store
    }
  }

  /// Forgets stores no rule of the running snapshot uses.
  func keep(only ids: Set<String>) { stores.withLock { $0 = $0.filter { ids.contains($0.key) } } }

  public var all: [DynamicPinStore] {
    stores.withLock { Array($0.values) }.sorted { $0.spec.file < $1.spec.file }
  }

  /// Whether `version` is the list in force of some store (0: no list, always current).
  func isCurrent(_ version: UInt64) -> Bool {
    version == 0 || stores.withLock { $0.values.contains { $0.version == version } }
  }
}
