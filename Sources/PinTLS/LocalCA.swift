import COpenSSL
import Foundation
import PinTrust

#if canImport(Glibc)
  import Glibc
#endif

/// The CA that signs the leaves pinproxy presents to intercepted clients.
/// Clients trust its certificate once; its key never leaves the state
/// directory (mode 0600) and is never logged.
public final class LocalCA: Sendable {
  public let certificate: X509Certificate
  let key: PrivateKey
  /// Certificates sent after the minted leaf (the CA itself when it is an
  /// intermediate of the operator's PKI).
  public let chain: [X509Certificate]
  /// One key of each type for every minted leaf, generated at start:
  /// minting then costs a signature, not a key generation. Each host gets a
  /// P-256 leaf and an RSA-2048 leaf; OpenSSL serves whichever the client
  /// can use, as nginx does with two `ssl_certificate`s — a legacy client
  /// that offers only RSA key exchange (`AES128-SHA`) or RSA signatures
  /// would find no shared cipher with an ECDSA leaf alone.
  let leafKey: PrivateKey
  let rsaLeafKey: PrivateKey
  private let minted: Locked<MintCache>
  public let leafValidity: TimeInterval

  public static let certificateFile = "ca.pem"
  public static let keyFile = "ca.key"

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  init(
    certificate: X509Certificate, key: PrivateKey, chain: [X509Certificate], cacheSize: Int,
    leafValidity: TimeInterval
  )
    throws(Failure)
  {
    self.certificate = certificate
    self.key = key
    self.chain = chain
    self.leafValidity = leafValidity
    do {
      leafKey = try PrivateKey.generateP256()
      rsaLeafKey = try PrivateKey.generateRSA(bits: 2048)
    } catch {
      throw Failure(description: error.description)
    }
    minted = Locked(MintCache(capacity: cacheSize))
    guard X509_check_private_key(certificate.pointer, key.pointer) == 1 else {
      OpenSSLErrorQueue.clear()
      throw Failure(description: "the CA key does not belong to the CA certificate")
    }
  }

  /// An operator-supplied CA (e.g. an intermediate of their PKI): the
  /// certificate file may hold the CA followed by its own chain.
  /// - Parameter running: the CA in use (a reload): returned as it is when the
  ///   files hold the same certificate and key, so its leaf keys (an RSA-2048
  ///   key takes a random 50 ms to seconds to generate) and the leaves it
  ///   minted are kept, and a reload costs no key generation.
  public static func load(
    certificate path: String, key keyPath: String, cacheSize: Int = 1024,
    leafValidity: TimeInterval = 7 * 86_400, reusing running: LocalCA? = nil
  )
    throws(Failure) -> LocalCA
  {
    do {
      let certificates = try CertificateFile.load(path)
      let key = try PrivateKey.load(keyPath)
      let ca = certificates[0]
      let sameChain =
        running?.chain.isEmpty == true
        ? certificates.count == 1 : running?.chain.map(\.der) == certificates.map(\.der)
      if let running, sameChain, running.certificate.der == ca.der,
        EVP_PKEY_eq(running.key.pointer, key.pointer) == 1
      {
        return running
      }
      OpenSSLErrorQueue.clear()
      let selfSigned = X509_check_issued(ca.pointer, ca.pointer) == X509_V_OK
      OpenSSLErrorQueue.clear()
      let chain = selfSigned ? [] : certificates
      return try LocalCA(
        certificate: ca, key: key, chain: chain, cacheSize: cacheSize, leafValidity: leafValidity)
    } catch let error as Failure {
      throw error
    } catch {
      throw Failure(description: "\(error)")
    }
  }

  /// Loads `ca.pem` and `ca.key` from `directory`, creating them first when absent.
  /// Returns the CA and whether it was created now.
  public static func loadOrCreate(in directory: String, now: Date = Date(), reusing running: LocalCA? = nil)
    throws(Failure) -> (LocalCA, created: Bool)
  {
    let certificatePath = directory + "/" + certificateFile
    let keyPath = directory + "/" + keyFile
    // Processes sharing the directory serialise on an flock of .ca.lock:
    // without it two first starts can each write half of a pair.
    do {
      try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    } catch {
      throw Failure(description: "cannot create \(directory): \(error)")
    }
    let lock = open(directory + "/.ca.lock", O_CREAT | O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0o600)
    guard lock >= 0 else {
      throw Failure(description: "\(directory)/.ca.lock: \(String(cString: strerror(errno)))")
    }
    defer { close(lock) }
    var lockStatus = stat()
    if fstat(lock, &lockStatus) == 0, let kind = BoundedFile.kind(of: lockStatus.st_mode) {
      throw Failure(description: "\(directory)/.ca.lock: it is \(kind), not a regular file; remove it")
    }
    guard flock(lock, LOCK_EX) == 0 else { throw Failure(description: "cannot lock \(directory)/.ca.lock") }
    defer { flock(lock, LOCK_UN) }
    if FileManager.default.fileExists(atPath: certificatePath) {
      return (try load(certificate: certificatePath, key: keyPath, reusing: running), false)
    }
    try create(in: directory, now: now)
    return (try load(certificate: certificatePath, key: keyPath), true)
  }

  /// Writes a new self-signed CA (valid ten years) into `directory`: the key
  /// with mode 0600, the certificate world-readable. Refuses to overwrite.
  public static func create(in directory: String, now: Date = Date()) throws(Failure) {
    let certificatePath = directory + "/" + certificateFile
    let keyPath = directory + "/" + keyFile
    guard !FileManager.default.fileExists(atPath: certificatePath),
      !FileManager.default.fileExists(atPath: keyPath)
    else {
      throw Failure(
        description: "\(directory) already holds a CA; remove \(certificateFile) and \(keyFile) to replace it"
      )
    }
    do {
      try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
      let key = try PrivateKey.generateP256()
      let host = ProcessInfo.processInfo.hostName
      let certificate = try CertificateBuilder.build(
        subject: [("O", "pinproxy"), ("CN", "pinproxy local CA (\(host.prefix(40)))")], publicKey: key,
        notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(10 * 365 * 86_400),
        extensions: [
          (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
          (NID_key_usage, "critical,keyCertSign,cRLSign"),
          (NID_subject_key_identifier, "hash"),
        ], issuer: nil, signingKey: key)
      guard
        FileManager.default.createFile(
          atPath: keyPath, contents: Data(key.pem), attributes: [.posixPermissions: 0o600])
      else { throw Failure(description: "\(keyPath): cannot write") }
      guard
        FileManager.default.createFile(
          atPath: certificatePath, contents: Data(certificate.pem), attributes: [.posixPermissions: 0o644])
      else { throw Failure(description: "\(certificatePath): cannot write") }
    } catch let error as Failure {
      throw error
    } catch {
      throw Failure(description: "cannot create the CA in \(directory): \(error)")
    }
  }

  /// The leaf for `host`, minted once and then served from a bounded LRU.
  /// Minting happens under the cache lock, so concurrent first requests for
  /// one host mint it once; a mint is two CA signatures, one per leaf.
  public func leaf(for host: TrustHost, now: Date = Date()) throws(Failure) -> X509Certificate {
    try leafReportingMint(for: host, now: now).leaves.ecdsa
  }

  /// Both leaves for `host`.
  public func leaves(for host: TrustHost, now: Date = Date()) throws(Failure) -> LeafPair {
    try leafReportingMint(for: host, now: now).leaves
  }

  /// The leaves, and whether this call minted them (for logs and metrics).
  public func leafReportingMint(for host: TrustHost, now: Date = Date()) throws(Failure) -> (
    leaves: LeafPair, minted: Bool
  ) {
    try minted.withLock { cache throws(Failure) -> (leaves: LeafPair, minted: Bool) in
      if let existing = cache.get(host, now: now) { return (existing, false) }
      // RSA key exchange (TLS_RSA_* suites) encrypts the premaster secret to
      // the leaf's key: the RSA leaf needs keyEncipherment too.
      let leaves = LeafPair(
        ecdsa: try mint(host, key: leafKey, keyUsage: "critical,digitalSignature", now: now),
        rsa: try mint(host, key: rsaLeafKey, keyUsage: "critical,digitalSignature,keyEncipherment", now: now))
      cache.put(host, leaves, expires: now.addingTimeInterval(leafValidity - 3600))
      return (leaves, true)
    }
  }

  public var mintedCount: Int { minted.withLock { $0.mints } }
  public var cachedCount: Int { minted.withLock { $0.count } }

  private func mint(_ host: TrustHost, key leafKey: PrivateKey, keyUsage: String, now: Date) throws(Failure)
    -> X509Certificate
  {
    let name: String
    let san: String
    switch host {
    case .dns(let dns):
      name = String(dns.prefix(64))
      san = "DNS:\(dns)"
    case .ip(let address):
      name = address.description
      san = "IP:\(address)"
    }
    let caEnd = X509Certificate.date(X509_get0_notAfter(certificate.pointer))
    do {
      return try CertificateBuilder.build(
        subject: [("O", "pinproxy"), ("CN", name)], publicKey: leafKey,
        notBefore: now.addingTimeInterval(-3600),
        notAfter: min(now.addingTimeInterval(leafValidity), caEnd),
        extensions: [
          (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, keyUsage),
          (NID_ext_key_usage, "serverAuth"), (NID_subject_alt_name, san),
          (NID_authority_key_identifier, "keyid"),
        ], issuer: (certificate, key), signingKey: key)
    } catch {
      throw Failure(description: "cannot mint a certificate for \(host): \(error.description)")
    }
  }
}

/// The two leaves minted for one host, one per key type.
public struct LeafPair: Sendable {
  public let ecdsa: X509Certificate
  public let rsa: X509Certificate
}

/// A small LRU of minted leaves.
struct MintCache {
  let capacity: Int
  private var entries: [TrustHost: (leaves: LeafPair, expires: Date, used: UInt64)] = [:]
  private var clock: UInt64 = 0
  private(set) var mints = 0

  init(capacity: Int) { self.capacity = max(1, capacity) }

  var count: Int { entries.count }

  mutating func get(_ host: TrustHost, now: Date) -> LeafPair? {
    guard let entry = entries[host], entry.expires > now else { return nil }
    clock += 1
    entries[host]?.used = clock
    return entry.leaves
  }

  mutating func put(_ host: TrustHost, _ leaves: LeafPair, expires: Date) {
    mints += 1
    if entries[host] == nil, entries.count >= capacity,
      let oldest = entries.min(by: { $0.value.used < $1.value.used })?.key
    {
      entries[oldest] = nil
    }
    clock += 1
    entries[host] = (leaves, expires, clock)
  }
}
