import COpenSSL
import Foundation
import PinTrust

/// The CT logs the proxy knows, loaded once into one OpenSSL `CTLOG_STORE`
/// shared by every rule that requires certificate transparency, with the
/// requirement (`minimumSCTs`) those rules enforce.
///
/// Not confined to a queue: immutable after `init`. OpenSSL only reads the
/// store while validating SCTs, and each validation has its own context.
public final class CTLogStore: @unchecked Sendable {
  let store: OpaquePointer
  public let requirement: TransparencyRequirement
  public let list: CTLogList
  /// SCTs already verified, by `verifiedKey`: an SCT's signature over a
  /// given certificate (and issuer) verifies or not forever, and a server
  /// sends the same SCTs with every handshake, so each is verified once
  /// rather than once per connection (OpenSSL 3 spends most of a
  /// verification fetching algorithms). Only successes are kept; the set is
  /// emptied when full, so it stays bounded.
  private let verified = Locked(Set<Digest256>())
  static let verifiedCapacity = 4096

  public struct LoadError: Error, CustomStringConvertible {
    public let description: String
  }

  public convenience init(file: String, minimumSCTs: Int) throws(LoadError) {
    let data: [UInt8]
    do {
      // The published list is ~100 KiB.
      data = try BoundedFile.read(file, limit: 4 << 20)
    } catch {
      throw LoadError(description: "the CT log list \(file): \(error.description)")
    }
    do {
      try self.init(list: CTLogList(json: data), minimumSCTs: minimumSCTs)
    } catch let error as CTLogList.ParseError {
      throw LoadError(description: "\(file): \(error.description)")
    } catch {
      throw error as! LoadError
    }
  }

  public init(list: CTLogList, minimumSCTs: Int) throws(LoadError) {
    self.list = list
    requirement = TransparencyRequirement(minimumSCTs: minimumSCTs, logs: list.entries.map(\.log))
    OpenSSLErrorQueue.clear()
    guard let store = CTLOG_STORE_new() else { throw LoadError(description: OpenSSLErrorQueue.drain()) }
    self.store = store
    guard !list.entries.isEmpty else { return }
    try Self.load(list, into: store)
  }

  deinit { CTLOG_STORE_free(store) }

  /// OpenSSL has no call that adds one log to a store; it loads stores from
  /// its own config format. The list is written in that format to a private
  /// temporary file (0600, removed at once) with generated section names,
  /// so no text from the list is interpreted by the config parser except
  /// the base64 keys, which were decoded and checked already.
  private static func load(_ list: CTLogList, into store: OpaquePointer) throws(LoadError) {
    var text = "enabled_logs = " + list.entries.indices.map { "log\($0)" }.joined(separator: ",") + "\n"
    for (index, entry) in list.entries.enumerated() {
      text += "[log\(index)]\ndescription = log\(index)\nkey = \(entry.keyBase64)\n"
    }
    let path = NSTemporaryDirectory() + "pinproxy-ctlogs-\(getpid())-\(UUID().uuidString).cnf"
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
    guard fd >= 0 else {
      throw LoadError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
    }
    defer { unlink(path) }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    guard written == bytes.count else { throw LoadError(description: "cannot write \(path)") }
    OpenSSLErrorQueue.clear()
    guard CTLOG_STORE_load_file(store, path) == 1 else {
      throw LoadError(description: "OpenSSL refused the CT log keys: \(OpenSSLErrorQueue.drain())")
    }
  }

  /// Validates each SCT against the known logs and reports what it found.
  /// - Parameters:
  ///   - scts: a borrowed `STACK_OF(SCT)` (from the handshake or a file).
  ///   - issuer: the leaf's issuer from the chain as built; without it an
  ///     embedded SCT (signed over the precertificate, which names the
  ///     issuer's key) cannot be verified and counts as unverified.
  func observe(_ scts: OpaquePointer?, leaf: X509Certificate, issuer: X509Certificate?, at time: Date)
    -> [SCTObservation]
  {
    guard let scts, pp_sk_SCT_num(scts) > 0 else { return [] }
    guard let context = CT_POLICY_EVAL_CTX_new() else { return [] }
    defer { CT_POLICY_EVAL_CTX_free(context) }
    _ = CT_POLICY_EVAL_CTX_set1_cert(context, leaf.pointer)
    if let issuer { _ = CT_POLICY_EVAL_CTX_set1_issuer(context, issuer.pointer) }
    CT_POLICY_EVAL_CTX_set_shared_CTLOG_STORE(context, store)
    CT_POLICY_EVAL_CTX_set_time(context, UInt64(max(0, time.timeIntervalSince1970 * 1000)))
    // What the SCTs are checked against, for the verified-SCT keys.
    let subject = SHA256.digest(leaf.der).bytes + (issuer.map { SHA256.digest($0.der).bytes } ?? [])
    var observations: [SCTObservation] = []
    for index in 0..<pp_sk_SCT_num(scts) {
      guard let sct = pp_sk_SCT_value(scts, index) else { continue }
      var idPointer: UnsafeMutablePointer<UInt8>?
      let length = SCT_get0_log_id(sct, &idPointer)
      let logID =
        idPointer.flatMap { Digest256(bytes: UnsafeBufferPointer(start: $0, count: Int(length))) }
        ?? Digest256(bytes: [UInt8](repeating: 0, count: 32))!
      let issuedAt = Date(timeIntervalSince1970: Double(SCT_get_timestamp(sct)) / 1000)
      let source = SCT_get_source(sct)
      observations.append(
        SCTObservation(
          logID: logID, timestamp: issuedAt, source: Self.source(source),
          status: status(
            of: sct, source: source, issuedAt: issuedAt, subject: subject, context: context, at: time)))
    }
    return observations
  }

  /// One SCT's status: from the verified set when it was verified before
  /// (and is not from the future at `time`), else from OpenSSL.
  private func status(
    of sct: OpaquePointer, source: sct_source_t, issuedAt: Date, subject: [UInt8], context: OpaquePointer,
    at time: Date
  ) -> SCTObservation.Status {
    let key = Self.verifiedKey(sct, source: source, subject: subject)
    if let key, issuedAt <= time, verified.withLock({ $0.contains(key) }) { return .valid }
    OpenSSLErrorQueue.clear()
    // 1 valid, 0 not; below 0 an internal error (out of memory), counted as unverified.
    let result = SCT_validate(sct, context)
    OpenSSLErrorQueue.clear()
    guard result >= 0 else { return .unverified }
    let status = Self.status(SCT_get_validation_status(sct))
    if status == .valid, let key {
      verified.withLock { set in
        if set.count >= Self.verifiedCapacity { set.removeAll(keepingCapacity: true) }
        set.insert(key)
      }
    }
    return status
  }

  /// SHA-256 over the serialized SCT, how it arrived (which decides what it
  /// signs) and the certificate and issuer it is checked against.
  static func verifiedKey(_ sct: OpaquePointer, source: sct_source_t, subject: [UInt8]) -> Digest256? {
    let length = i2o_SCT(sct, nil)
    guard length > 0 else { return nil }
    var bytes = [UInt8](repeating: 0, count: Int(length))
    let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
      var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
      return i2o_SCT(sct, &cursor)
    }
    guard written == length else { return nil }
    bytes.append(UInt8(truncatingIfNeeded: source.rawValue))
    return SHA256.digest(bytes + subject)
  }

  static func source(_ value: sct_source_t) -> SCTObservation.Source {
    switch value {
    case SCT_SOURCE_X509V3_EXTENSION: return .embedded
    case SCT_SOURCE_TLS_EXTENSION: return .tlsExtension
    case SCT_SOURCE_OCSP_STAPLED_RESPONSE: return .ocspStaple
    default: return .unknown
    }
  }

  static func status(_ value: sct_validation_status_t) -> SCTObservation.Status {
    switch value {
    case SCT_VALIDATION_STATUS_VALID: return .valid
    case SCT_VALIDATION_STATUS_INVALID: return .invalid
    case SCT_VALIDATION_STATUS_UNKNOWN_LOG: return .unknownLog
    case SCT_VALIDATION_STATUS_UNKNOWN_VERSION: return .unknownVersion
    default: return .unverified
    }
  }
}
