import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// The daemon's revocation information, shared by every snapshot (a reload
/// keeps what was fetched): the fetched CRLs and OCSP answers, the metric
/// counters, and the fetches in flight. One fetch per URL (CRL) or
/// certificate (OCSP) is in flight at a time; every connection that needs
/// it waits for that one.
public final class RevocationState: Sendable {
  let fetched = FetchedRevocation()
  let counters = RevocationCounters()
  /// Where fetched CRLs are kept across restarts (`stateDirectory/revocation`).
  let directory: String?
  private let waiters = Locked<[String: [@Sendable () -> Void]]>([:])

  /// A fetch has this long to answer.
  static let deadline: Double = 5
  /// Fetches in flight at once; more are answered as failed at once.
  static let maximumInFlight = 64

  init(directory: String? = nil) {
    self.directory = directory
    if let directory { load(from: directory) }
  }

  /// Fetches each of `fetches` (joining those already in flight), then
  /// calls `completion` once, on `loop`'s queue, whatever became of them.
  func fetch(
    _ fetches: [RevocationFetch], dialer: UpstreamDialer, on loop: EventLoop,
    _ completion: @escaping () -> Void
  ) {
    loop.preconditionInLoop()
    nonisolated(unsafe) var remaining = fetches.count
    nonisolated(unsafe) let completion = completion
    let done: @Sendable () -> Void = {
      loop.execute {
        remaining -= 1
        if remaining == 0 { completion() }
      }
    }
    guard !fetches.isEmpty else { return completion() }
    for fetch in fetches {
      let key = FetchedRevocation.key(fetch)
      let starts: Bool? = waiters.withLock { waiters in
        if waiters[key] != nil {
          waiters[key]!.append(done)
          return false
        }
        guard waiters.count < Self.maximumInFlight else { return nil }
        waiters[key] = [done]
        return true
      }
      switch starts {
      case nil:
        fetched.recordFailure(key, "too many revocation fetches in flight", at: Date())
        done()
      case false?: break
      case true?: start(fetch, key: key, dialer: dialer, on: loop)
      }
    }
  }

  private func start(_ fetch: RevocationFetch, key: String, dialer: UpstreamDialer, on loop: EventLoop) {
    guard let request = Self.request(for: fetch) else {
      return finish(key, failure: "\(fetch.url) is not an http:// URL with a host")
    }
    InternalExchange.start(request, dialer: dialer, on: loop) { [self] result in
      let body: [UInt8]
      switch result {
      case .failure(let failure): return finish(key, failure: failure.reason)
      case .success(let response):
        guard response.status == 200 else { return finish(key, failure: "HTTP status \(response.status)") }
        body = response.body
      }
      // Decoding a large CRL is not work for an event loop.
      DispatchQueue.global().async { [self] in
        let now = Date()
        switch fetch {
        case .crl(let url):
          do {
            let crl = try CertificateRevocationList(bytes: body)
            if let refused = fetched.store(crl, from: url, at: now) {
              // A CRL that cannot replace the one held keeps it; it counts as missing only without one.
              return finish(key, failure: fetched.crl(at: url) == nil ? refused : nil)
            }
            persist(crl, url: url)
            finish(key, failure: nil)
          } catch {
            finish(key, failure: "\(error)")
          }
        case .ocsp(let url, let request, let certID):
          guard let dates = OCSPResponseCheck.updateTimes(body) else {
            return finish(key, failure: "the answer is not a successful OCSP response")
          }
          fetched.store(
            answer: body, for: certID, request: request, from: url, nextUpdate: dates.nextUpdate, at: now)
          finish(key, failure: nil)
        }
      }
    }
  }

  private func finish(_ key: String, failure: String?) {
    if let failure { fetched.recordFailure(key, failure, at: Date()) }
    let waiting = waiters.withLock { $0.removeValue(forKey: key) } ?? []
    for waiter in waiting { waiter() }
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

  // MARK: Kept across restarts

  private func file(for url: String) -> String? {
    directory.map { "\($0)/\(SHA256.digest(Array(url.utf8)).hex)" }
  }

  private func persist(_ crl: CertificateRevocationList, url: String) {
    guard let directory, let base = file(for: url) else { return }
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: base + ".crl", contents: Data(crl.der))
    FileManager.default.createFile(atPath: base + ".url", contents: Data(url.utf8))
  }

  /// CRLs fetched before a restart, still subject to every check when used.
  private func load(from directory: String) {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    for name in names where name.hasSuffix(".url") {
      let base = directory + "/" + name.dropLast(4)
      guard let urlBytes = try? BoundedFile.read(base + ".url", limit: 4096),
        let der = try? BoundedFile.read(base + ".crl", limit: CertificateRevocationList.maximumBytes),
        let crl = try? CertificateRevocationList(bytes: der)
      else { continue }
      let url = String(decoding: urlBytes, as: UTF8.self)
      guard file(for: url) == base else { continue }
      fetched.store(crl, from: url, at: Date())
    }
  }
}
