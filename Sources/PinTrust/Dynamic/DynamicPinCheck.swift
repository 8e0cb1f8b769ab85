import Foundation

/// What a rule with `dynamicPins` asks of a chain, beside its static policy:
/// the list in force and the names its leaf may have.
public struct DynamicPinRequirement: Sendable, Equatable {
  public var list: PinList
  public var expectedCommonNames: [String]

  public init(list: PinList, expectedCommonNames: [String]) {
    self.list = list
    self.expectedCommonNames = expectedCommonNames
  }
}

/// The connection check of a dynamic pin list (the Wultra validation), over
/// the certificates the server presented, leaf first:
/// 1. `expectedCommonNames` given and the leaf's CN not in it → untrusted;
/// 2. no unexpired entry at all → empty;
/// 3. an unexpired entry whose name equals the CN of the certificate at its
///    depth (0, the leaf, unless the list says otherwise) and whose
///    fingerprint is that certificate's SHA-256 → trusted;
/// 4. entries for the leaf's name exist but none matched → untrusted;
///    otherwise → empty.
/// Untrusted and empty both refuse. A list's `domainsConfig` can say that a
/// name needs no pinning; it is shown but never obeyed, so a list cannot
/// switch pinning off remotely: a rule without `dynamicPins` is how a host
/// goes unpinned.
public enum DynamicPinCheck {
  public static func evaluate(_ chain: [Certificate], requirement: DynamicPinRequirement, at time: Date)
    -> Result<PinListEntry, TrustFailure>
  {
    let leaf = chain.first
    let name = leaf?.commonName
    let fingerprint = leaf?.fingerprint ?? Digest256(bytes: [UInt8](repeating: 0, count: 32))!
    let expected = requirement.expectedCommonNames
    if !expected.isEmpty && !expected.contains(name ?? "") {
      return .failure(
        .dynamicPinsUntrusted(commonName: name, fingerprint: fingerprint, mismatch: .unexpectedName(expected))
      )
    }
    let usable = requirement.list.usable(at: time)
    if usable.isEmpty {
      return .failure(
        .dynamicPinsEmpty(
          commonName: name, source: requirement.list.source, total: requirement.list.entries.count, usable: 0)
      )
    }
    var match: PinListEntry?
    for entry in usable where entry.depth < chain.count {
      let certificate = chain[entry.depth]
      // Every entry is compared, so timing does not tell which one matched.
      if certificate.commonName == entry.name && certificate.fingerprint == entry.fingerprint && match == nil
      {
        match = entry
      }
    }
    if let match { return .success(match) }
    let forName = usable.filter { $0.depth == 0 && $0.name == name }
    if !forName.isEmpty {
      return .failure(
        .dynamicPinsUntrusted(commonName: name, fingerprint: fingerprint, mismatch: .noMatchingEntry(forName))
      )
    }
    return .failure(
      .dynamicPinsEmpty(
        commonName: name, source: requirement.list.source, total: requirement.list.entries.count,
        usable: usable.count))
  }
}

/// Why a leaf failed a dynamic pin list that has entries.
public enum DynamicPinMismatch: Sendable, Equatable {
  /// The leaf's CN is not among `expectedCommonNames`.
  case unexpectedName([String])
  /// The list has entries for the leaf's CN, none with its fingerprint.
  case noMatchingEntry([PinListEntry])
}
