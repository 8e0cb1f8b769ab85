import COpenSSL
import Foundation
import PinTrust

/// Path building with alternatives. OpenSSL builds one path, taking the first
/// certificate whose name fits at each step; when that path fails (an
/// expired cross-signature, an intermediate whose name constraints forbid
/// the leaf) it does not go back to try another issuer, where Go's and
/// rustls's builders do. We do: the first attempt is OpenSSL's own path
/// through everything the server sent; then each chain of presented
/// certificates that could have issued one another, leaf upwards, is tried
/// on its own, and OpenSSL completes it from the store.
///
/// The search is bounded so a hostile bag of certificates costs little:
/// only the first `bagLimit` presented certificates are considered, paths
/// are at most `depthLimit` long, at most `issuerTestLimit` issuer tests and
/// `attemptLimit` verifications are made in total.
struct PathSearch {
  static let bagLimit = 16
  static let depthLimit = 6
  static let issuerTestLimit = 256
  static let attemptLimit = 12

  let leaf: X509Certificate
  let bag: [X509Certificate]
  let store: AnchorStore
  let purpose: VerificationPurpose
  let time: Date

  init(
    leaf: X509Certificate, presented: ArraySlice<X509Certificate>, store: AnchorStore,
    purpose: VerificationPurpose, at time: Date
  ) {
    self.leaf = leaf
    bag = Array(presented.prefix(Self.bagLimit))
    self.store = store
    self.purpose = purpose
    self.time = time
  }

  /// The first path that verifies and passes `accept`; otherwise the first path's result.
  func run(accept: (ChainVerification) -> ChainFailure?) -> ChainVerification {
    let first = attempt(bag, accept: accept)
    if first.isValid { return first }
    var attempts = 1
    var issuerTests = 0
    var tried: Set<[Int]> = []
    // Depth-first over "who could have issued whom" among the presented
    // certificates; every prefix is a candidate path (OpenSSL finishes it
    // from the store). `stack` holds paths still to extend.
    var stack: [[Int]] = [[]]
    while let path = stack.popLast() {
      if tried.insert(path).inserted {
        guard attempts < Self.attemptLimit else { break }
        attempts += 1
        let result = attempt(path.map { bag[$0] }, accept: accept)
        if result.isValid { return result }
      }
      guard path.count < Self.depthLimit else { continue }
      let subject = path.last.map { bag[$0] } ?? leaf
      var issuers: [[Int]] = []
      for index in bag.indices where !path.contains(index) {
        issuerTests += 1
        if issuerTests > Self.issuerTestLimit { return first }
        if X509_check_issued(bag[index].pointer, subject.pointer) == X509_V_OK {
          issuers.append(path + [index])
        }
      }
      stack.append(contentsOf: issuers.reversed())  // presented order first
    }
    OpenSSLErrorQueue.clear()
    return first
  }

  private func attempt(_ untrusted: [X509Certificate], accept: (ChainVerification) -> ChainFailure?)
    -> ChainVerification
  {
    var result = ChainBuilder.verify(
      leaf: leaf, untrusted: untrusted, store: store, purpose: purpose, at: time)
    if result.isValid, let failure = accept(result) { result.failure = failure }
    return result
  }
}
