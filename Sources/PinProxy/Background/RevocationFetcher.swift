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
    guard let request = Self.request(for: fetch) else {
      return state.finish(key, failure: "\(fetch.url) is not an http:// URL with a host")
    }
    InternalExchange.start(request, dialer: dialer, on: loop) { result in
      let body: [UInt8]
      switch result {
      case .failure(let failure): return state.finish(key, failure: failure.reason)
      case .success(let response):
        guard response.status == 200 else {
          return state.finish(key, failure: "HTTP status \(response.status)")
        }
        body = response.body
      }
      // Decoding a large CRL is not work for an event loop.
      DispatchQueue.global().async { Self.store(body, for: fetch, key: key, in: state) }
    }
  }

  private static func store(
    _ body: [UInt8], for fetch: RevocationFetch, key: String, in state: RevocationState
  ) {
    let now = Date()
    switch fetch {
    case .crl(let url):
      let crl: CertificateRevocationList
      do {
        crl = try CertificateRevocationList(bytes: body)
      } catch {
        return state.finish(key, failure: "\(error)")
      }
      if let refused = state.fetched.store(crl, from: url, at: now) {
        // A CRL that cannot replace the one held keeps it; it counts as missing only without one.
        return state.finish(key, failure: state.fetched.crl(at: url) == nil ? refused : nil)
      }
      state.persist(crl, url: url)
      state.finish(key, failure: nil)
    case .ocsp(let url, let request, let certID):
      guard let dates = OCSPResponseCheck.updateTimes(body) else {
        return state.finish(key, failure: "the answer is not a successful OCSP response")
      }
      state.fetched.store(
        answer: body, for: certID, request: request, from: url, nextUpdate: dates.nextUpdate, at: now)
      state.finish(key, failure: nil)
    }
  }

  /// GET when the base64 request is small (RFC 6960 appendix A.1), else POST.
  static func request(for fetch: RevocationFetch) -> InternalRequest? {
    switch fetch {
    case .crl(let url):
      guard let parsed = InternalURL(url) else { return nil }
      var request = InternalRequest(url: parsed, deadline: deadline)
      request.maximumBodyBytes = CertificateRevocationList.maximumBytes
      request.followsCertificate = true
      return request
    case .ocsp(let url, let der, _):
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
