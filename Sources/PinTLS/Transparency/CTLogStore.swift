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

  public struct LoadError: Error, CustomStringConvertible {
    public let description: String
  }

  public convenience init(file: String, minimumSCTs: Int) throws(LoadError) {
    guard let data = FileManager.default.contents(atPath: file) else {
      throw LoadError(description: "cannot read the CT log list \(file)")
    }
    do {
      try self.init(list: CTLogList(json: [UInt8](data)), minimumSCTs: minimumSCTs)
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
    OpenSSLErrorQueue.clear()
    // Sets each SCT's status. Below 0 (out of memory) it stops part way and
    // later SCTs keep an older status, so then none of them counts.
    let validated = SCT_LIST_validate(scts, context) >= 0
    OpenSSLErrorQueue.clear()
    var observations: [SCTObservation] = []
    for index in 0..<pp_sk_SCT_num(scts) {
      guard let sct = pp_sk_SCT_value(scts, index) else { continue }
      var idPointer: UnsafeMutablePointer<UInt8>?
      let length = SCT_get0_log_id(sct, &idPointer)
      let logID =
        idPointer.flatMap { Digest256(bytes: UnsafeBufferPointer(start: $0, count: Int(length))) }
        ?? Digest256(bytes: [UInt8](repeating: 0, count: 32))!
      let millis = SCT_get_timestamp(sct)
      observations.append(
        SCTObservation(
          logID: logID, timestamp: Date(timeIntervalSince1970: Double(millis) / 1000),
          source: Self.source(SCT_get_source(sct)),
          status: validated ? Self.status(SCT_get_validation_status(sct)) : .unverified))
    }
    return observations
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
