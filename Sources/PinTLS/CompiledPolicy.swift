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

  public init(policy: SecurityPolicy, identity: PolicyIdentity, registry: AnchorSetRegistry) throws {
    self.policy = policy
    self.identity = identity
    anchors = try registry.store(for: policy.anchors)
    if policy.pinnedCertificates.isEmpty {
      pinnedAnchors = nil
    } else {
      let pinned = try policy.pinnedCertificates.map { certificate in
        try X509Certificate(der: certificate.der)
      }
      pinnedAnchors = try AnchorStore(includeSystem: false, certificates: pinned, partialChain: .always)
    }
  }

  /// Evaluates through the engine's fingerprint cache.
  /// - Parameter dynamicPins: the rule's list in force and its version
  ///   (which keys the cache), nil for a rule without `dynamicPins`.
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, dynamicPins: (DynamicPinRequirement, version: UInt64)? = nil,
    engine: TrustEngine, at time: Date
  ) -> TrustDecision {
    engine.evaluate(
      chain, host: host, policy: policy, dynamicPins: dynamicPins?.0,
      identity: identity.under(pinList: dynamicPins?.version ?? 0), verifier: self, at: time)
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
    return PathSearch(leaf: leaf, presented: parsed.dropFirst(), store: store, purpose: purpose, at: time)
      .run(accept: accept)
  }
}
