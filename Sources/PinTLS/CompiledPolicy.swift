import COpenSSL
import Foundation
import PinTrust

/// A domain policy compiled against OpenSSL: its anchor store (shared through
/// the registry) and, in certificate mode, a store of the pinned certificates
/// as partial-chain trust points. It is the `ChainVerifier` the evaluator uses.
///
/// Not confined to a queue: immutable after `init`; its stores are only
/// read, under OpenSSL's own locks, by concurrent verifications.
public final class CompiledPolicy: ChainVerifier, @unchecked Sendable {
  public let policy: SecurityPolicy
  public let identity: PolicyIdentity
  let anchors: AnchorStore
  let pinnedAnchors: AnchorStore?
  /// The CRLs of the policy's anchor sets and, in the daemon, what was fetched.
  public let revocation: RevocationProvider
  /// Configured anchors: a path ending in one is not publicly trusted.
  private let configuredAnchors: Set<Digest256>
  private let usesSystemStore: Bool

  public init(
    policy: SecurityPolicy, identity: PolicyIdentity, registry: AnchorSetRegistry,
    fetched: FetchedRevocation? = nil, counters: RevocationCounters? = nil
  ) throws {
    self.policy = policy
    self.identity = identity
    anchors = try registry.store(for: policy.anchors)
    let configured = registry.certificates(for: policy.anchors)
    revocation = RevocationProvider(
      crls: registry.crls(for: policy.anchors), fetched: fetched, counters: counters, anchors: anchors,
      anchorCertificates: configured)
    configuredAnchors = Set(configured.map { SHA256.digest($0.der) })
    usesSystemStore = policy.anchors.contains(SecurityPolicy.systemAnchors)
    if policy.pinnedCertificates.isEmpty {
      pinnedAnchors = nil
    } else {
      let pinned = try policy.pinnedCertificates.map { certificate in
        try X509Certificate(der: certificate.der)
      }
      pinnedAnchors = try AnchorStore(includeSystem: false, certificates: pinned, partialChain: .always)
    }
  }

  /// Evaluates through the engine's fingerprint cache, revocation included.
  /// - Parameters:
  ///   - dynamicPins: the rule's list in force and its version (which keys
  ///     the cache), nil for a rule without `dynamicPins`.
  ///   - staple: the OCSP response stapled to this handshake.
  ///   - fetching: whether revocation information may be asked for
  ///     (`TrustFailure.revocationPending`); false decides with what is at hand.
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, dynamicPins: (DynamicPinRequirement, version: UInt64)? = nil,
    staple: [UInt8]? = nil, fetching: Bool = false, engine: TrustEngine, at time: Date
  ) -> TrustDecision {
    var cached = false
    return evaluate(
      chain, host: host, dynamicPins: dynamicPins, staple: staple, fetching: fetching, engine: engine,
      at: time,
      cached: &cached)
  }

  /// The same, telling whether the fingerprint cache served it (`cached`).
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, dynamicPins: (DynamicPinRequirement, version: UInt64)? = nil,
    staple: [UInt8]? = nil, fetching: Bool = false, engine: TrustEngine, at time: Date, cached: inout Bool
  ) -> TrustDecision {
    engine.evaluate(
      chain, host: host, policy: policy, dynamicPins: dynamicPins?.0,
      identity: identity.under(pinList: dynamicPins?.version ?? 0), verifier: self,
      revocation: RevocationInput(
        source: revocation, settings: policy.revocation, staple: staple, fetching: fetching),
      revocationGeneration: revocation.generation, at: time, cached: &cached)
  }

  public func certificates(of chain: PresentedChain) -> [Certificate] {
    var values: [Certificate] = []
    for der in chain.certificates {
      guard let parsed = try? X509Certificate(der: der) else { break }
      values.append(parsed.value())
    }
    return values
  }

  public func verify(
    _ chain: PresentedChain, anchors source: AnchorSource, purpose: VerificationPurpose, at time: Date,
    accept: (ChainVerification) -> ChainFailure?
  ) -> ChainVerification {
    var parsed: [X509Certificate] = []
    parsed.reserveCapacity(chain.certificates.count)
    do {
      for der in chain.certificates { parsed.append(try X509Certificate(der: der)) }
    } catch {
      return ChainVerification(
        builtChain: [],
        failure: ChainFailure(kind: .malformed, depth: 0, subject: nil, detail: error.description),
        signatureLinkedCount: 0)
    }
    guard let leaf = parsed.first else {
      return ChainVerification(
        builtChain: [],
        failure: ChainFailure(kind: .malformed, depth: 0, subject: nil, detail: "empty chain"),
        signatureLinkedCount: 0)
    }
    let store: AnchorStore
    switch source {
    case .policyAnchors: store = anchors
    case .pinnedCertificates:
      guard let pinnedAnchors else {
        return ChainVerification(
          builtChain: [leaf.value()],
          failure: ChainFailure(kind: .untrusted, depth: 0, subject: nil, detail: "no pinned certificates"),
          signatureLinkedCount: 1)
      }
      store = pinnedAnchors
    }
    // Only a path to a system root is held to the CA/Browser Forum rules.
    let publicRoots = source == .policyAnchors && usesSystemStore
    let configured = configuredAnchors
    return PathSearch(leaf: leaf, presented: parsed.dropFirst(), store: store, purpose: purpose, at: time)
      .run { path in
        var path = path
        path.endsInSystemStore =
          publicRoots && !(path.builtChain.last.map { configured.contains($0.fingerprint) } ?? false)
        return accept(path)
      }
  }
}
