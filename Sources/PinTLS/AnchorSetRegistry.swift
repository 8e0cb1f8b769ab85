import Foundation
import PinTrust

/// Named anchor sets (`system` built in) and the stores compiled from their
/// unions. One store per distinct union, built the first time a policy asks
/// for it and shared afterwards.
public final class AnchorSetRegistry: Sendable {
  private let sets: [String: [X509Certificate]]
  /// Each set's CRLs (`anchorSets.NAME.crls`).
  private let crlSets: [String: CRLSet]
  /// Certificates that stand in for `system` (tests, `--anchors`); nil = the OS store.
  private let systemOverride: [X509Certificate]?
  private let stores = Locked<[[String]: AnchorStore]>([:])

  public struct UnknownAnchorSet: Error, CustomStringConvertible {
    public let name: String
    public let known: [String]
    public var description: String {
      "unknown anchor set \"\(name)\" (known: \(known.sorted().joined(separator: ", ")))"
    }
  }

  /// - Parameters:
  ///   - sets: named sets of anchors, from the config's `anchorSets`.
  ///   - systemOverride: when set, `system` means these certificates instead of the OS store.
  public init(
    sets: [String: [X509Certificate]] = [:], crls: [String: CRLSet] = [:],
    systemOverride: [X509Certificate]? = nil
  ) {
    self.sets = sets
    crlSets = crls
    self.systemOverride = systemOverride
  }

  public var names: [String] { [SecurityPolicy.systemAnchors] + sets.keys.sorted() }

  /// Checks that every name is known, without building anything.
  public func validate(_ names: [String]) throws(UnknownAnchorSet) {
    for name in names where name != SecurityPolicy.systemAnchors && sets[name] == nil {
      throw UnknownAnchorSet(name: name, known: self.names)
    }
  }

  /// The CRLs of the sets named.
  public func crls(for names: [String]) -> CRLSet {
    CRLSet.union(Set(names).sorted().compactMap { crlSets[$0] })
  }

  /// Every CRL of every set, by set name (for `/policies`).
  public var allCRLs: [(set: String, entries: [CRLSet.Entry])] {
    crlSets.keys.sorted().map { ($0, crlSets[$0]!.entries) }
  }

  /// The configured (not system) anchors among `names`.
  public func certificates(for names: [String]) -> [X509Certificate] {
    Set(names).sorted().flatMap { sets[$0] ?? [] }
  }

  /// The store for the union of `names`; built once per distinct union.
  public func store(for names: [String]) throws -> AnchorStore {
    try validate(names)
    let key = Array(Set(names)).sorted()
    return try stores.withLock { stores in
      if let existing = stores[key] { return existing }
      var certificates: [X509Certificate] = []
      var includeSystem = false
      for name in key {
        if name == SecurityPolicy.systemAnchors {
          if let systemOverride { certificates += systemOverride } else { includeSystem = true }
        } else {
          certificates += sets[name] ?? []
        }
      }
      // Every member of a named anchor set is a trust point, self-signed or
      // not, as with SecTrustSetAnchorCertificates: an operator given only a
      // national sub-CA must be able to anchor on it. A chain still goes on
      // to the root when the set holds it too. `system` alone is unchanged.
      let named = key.contains { $0 != SecurityPolicy.systemAnchors }
      let store = try AnchorStore(
        includeSystem: includeSystem, certificates: certificates, partialChain: named ? .whenNoRoot : .never)
      stores[key] = store
      return store
    }
  }
}
