import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// Fetches CRLs and OCSP answers through the internal client, for the trust
/// decision (`UpstreamTrust`) and the refresher, into the snapshot's
/// `RevocationState`: plain HTTP to where the verified certificate points,
/// bounded in time and size, decoded off the loop.
struct RevocationFetcher: RevocationFetching {
  /// A fetch has this long to answer.
  static let deadline: Double = 5

  /// Fetches each of `fetches` (joining those already in flight), then
  /// calls `completion` once, on `loop`'s queue, whatever became of them.
  func fetch(
    _ fetches: [RevocationFetch], dialer: UpstreamDialer, on loop: EventLoop,
    _ completion: @escaping () -> Void
  ) {
    loop.preconditionInLoop()
    guard !fetches.isEmpty else { return completion() }
    let state = dialer.snapshot.revocation
    // Counted on the loop's queue only: each waiter hops back to it.
    nonisolated(unsafe) var remaining = fetches.count
    nonisolated(unsafe) let completion = completion
    let done: @Sendable () -> Void = {
      loop.execute {
        remaining -= 1
        if remaining == 0 { completion() }
      }
    }
    for fetch in fetches {
      let key = FetchedRevocation.key(fetch)
      switch state.join(key, done) {
      case nil:
        state.fetched.recordFailure(key, "too many revocation fetches in flight", at: Date())
        done()
      case false?: break
      case true?: start(fetch, key: key, state: state, dialer: dialer, on: loop)
      }
    }
  }

  private func start(
    _ fetch: RevocationFetch, key: String, state: RevocationState, dialer: UpstreamDialer, on loop: EventLoop
  ) {
    guard var request = Self.request(for: fetch) else {
      return state.finish(key, failure: "\(fetch.url) is not an http:// URL with a host")
    }
    request.budget = state.fetchBudget
    InternalExchange.start(request, dialer: dialer, on: loop) { result in
      let response: InternalResponse
      switch result {
      case .failure(let failure): return state.finish(key, failure: failure.reason)
      case .success(let success):
        guard success.status == 200 else {
          return state.finish(key, failure: "HTTP status \(success.status)")
        }
        response = success
      }
      // Decoding a large CRL is not work for an event loop. The body stays
      // charged to the fetch budget until it is decoded and dropped.
      DispatchQueue.global().async {
        withExtendedLifetime(response.hold) { Self.store(response.body, for: fetch, key: key, in: state) }
      }
    }
  }

  /// Decodes and verifies what arrived, then keeps it (or keeps what is held).
  private static func store(
    _ body: [UInt8], for fetch: RevocationFetch, key: String, in state: RevocationState
  ) {
    let now = Date()
    switch fetch {
    case .crl(let url, let issuerDER):
      let crl: CertificateRevocationList
      do {
        crl = try CertificateRevocationList(bytes: body)
      } catch {
        return state.finish(key, failure: "\(error)")
      }
      // Verified here, off the loops, against the issuer that asked; the
      // result is remembered for the handshakes that use it.
      if let issuer = try? X509Certificate(der: issuerDER) { _ = crl.check(signedBy: issuer) }
      if let refused = state.fetched.store(crl, from: url, at: now) {
        // A CRL that cannot replace the one held keeps it; it counts as missing only without one.
        return state.finish(key, failure: state.fetched.crl(at: url) == nil ? refused : nil)
      }
      state.persist(crl, url: url)
      state.finish(key, failure: nil)
    case .ocsp(let url, _, let certID, let leafDER, let issuerDER):
      guard let leaf = try? X509Certificate(der: leafDER), let issuer = try? X509Certificate(der: issuerDER)
      else {
        return state.finish(key, failure: "the certificate asked about does not parse")
      }
      let finding = OCSPResponseCheck.finding(
        body, leaf: leaf, issuer: issuer, origin: .responder(url), at: now)
      if let kept = state.fetched.store(answer: body, finding: finding, for: fetch, at: now) {
        // A held answer stays; without one, the query failed.
        return state.finish(key, failure: state.fetched.answer(for: certID) == nil ? kept : nil)
      }
      state.finish(key, failure: nil)
    }
  }

  /// GET when the base64 request is small (RFC 6960 appendix A.1), else POST.
  static func request(for fetch: RevocationFetch) -> InternalRequest? {
    switch fetch {
    case .crl(let url, _):
      guard let parsed = InternalURL(url) else { return nil }
      var request = InternalRequest(url: parsed, deadline: deadline)
      request.maximumBodyBytes = CertificateRevocationList.maximumBytes
      request.followsCertificate = true
      return request
    case .ocsp(let url, let der, _, _, _):
      let encoded = Base64.encode(der)
      let escaped = encoded.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(
        of: "/", with: "%2F"
      )
      .replacingOccurrences(of: "=", with: "%3D")
      let base = url.hasSuffix("/") ? url : url + "/"
      var request: InternalRequest
      if encoded.utf8.count < 255, let parsed = InternalURL(base + escaped) {
        request = InternalRequest(url: parsed, deadline: deadline)
      } else {
        guard let parsed = InternalURL(url) else { return nil }
        request = InternalRequest(
          method: "POST", url: parsed, headers: [("Content-Type", "application/ocsp-request")], body: der,
          deadline: deadline)
      }
      request.maximumBodyBytes = OCSPResponseCheck.maximumBytes
      request.followsCertificate = true
      return request
    }
  }
}
