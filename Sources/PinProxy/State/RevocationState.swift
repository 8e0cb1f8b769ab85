import Foundation
import PinTLS
import PinTrust

/// The daemon's revocation information, shared by every snapshot (a reload
/// keeps what was fetched): the fetched CRLs and OCSP answers, the metric
/// counters, and which fetches are in flight. One fetch per URL (CRL) or
/// certificate (OCSP) is in flight at a time; every connection that needs
/// it waits for that one (`Background/RevocationFetcher`).
public final class RevocationState: Sendable {
  let fetched = FetchedRevocation()
  let counters = RevocationCounters()
  /// The bytes all revocation fetches may hold at once.
  let fetchBudget = FetchBudget()
  /// Where fetched CRLs are kept across restarts (`stateDirectory/revocation`).
  let directory: String?
  private let waiters = Locked<[String: [@Sendable () -> Void]]>([:])

  /// Fetches in flight at once; more are answered as failed at once.
  static let maximumInFlight = 64

  init(directory: String? = nil) {
    self.directory = directory
    if let directory { load(from: directory) }
  }

  /// Registers `waiter` for the fetch `key`: true when the caller is to
  /// start it, false when it joined one in flight, nil when too many are.
  func join(_ key: String, _ waiter: @escaping @Sendable () -> Void) -> Bool? {
    waiters.withLock { waiters in
      if waiters[key] != nil {
        waiters[key]!.append(waiter)
        return false
      }
      guard waiters.count < Self.maximumInFlight else { return nil }
      waiters[key] = [waiter]
      return true
    }
  }

  /// Ends the fetch `key`, remembering `failure` when it failed, and wakes
  /// everyone who waited for it.
  func finish(_ key: String, failure: String?) {
    if let failure { fetched.recordFailure(key, failure, at: Date()) }
    let waiting = waiters.withLock { $0.removeValue(forKey: key) } ?? []
    for waiter in waiting { waiter() }
  }

  // MARK: Kept across restarts

  private func file(for url: String) -> String? {
    directory.map { "\($0)/\(SHA256.digest(Array(url.utf8)).hex)" }
  }

  func persist(_ crl: CertificateRevocationList, url: String) {
    guard let directory, let base = file(for: url) else { return }
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: base + ".crl", contents: Data(crl.der))
    FileManager.default.createFile(atPath: base + ".url", contents: Data(url.utf8))
    prune(directory)
  }

  /// Removes the files of CRLs no longer held (evicted), so the directory
  /// holds at most what memory does.
  private func prune(_ directory: String) {
    let held = Set(fetched.crls.compactMap { file(for: $0.url) })
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    for name in names where name.hasSuffix(".url") || name.hasSuffix(".crl") {
      let base = directory + "/" + name.dropLast(4)
      if !held.contains(base) { try? FileManager.default.removeItem(atPath: directory + "/" + name) }
    }
  }

  /// CRLs fetched before a restart, still subject to every check when used.
  private func load(from directory: String) {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    for name in names.filter({ $0.hasSuffix(".url") }).prefix(FetchedRevocation.maximumCRLs) {
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
