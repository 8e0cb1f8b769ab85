import COpenSSL
import PinTrust

/// What a tunnel listener with `downstreamClientCA` requires of a client:
/// a certificate that chains to one of `anchors` (any of them may be an
/// intermediate: each is a trust point), usable for client authentication,
/// and — when names are given — carrying one of them (ghostunnel's
/// `--allow-cn`, `--allow-dns`, `--allow-uri`). Checked by OpenSSL's verify
/// callback during the handshake, so a refused client gets a TLS alert and
/// never a byte of the tunnel.
///
/// Immutable after `init`; shared by every loop through its `SSL_CTX`.
public final class ClientCertificateRequirement: @unchecked Sendable {
  let anchors: [X509Certificate]
  let commonNames: Set<String>
  /// Lowercased: DNS names compare without case.
  let dnsNames: Set<String>
  let uris: Set<String>

  public init(
    anchors: [X509Certificate], commonNames: [String] = [], dnsNames: [String] = [], uris: [String] = []
  ) {
    self.anchors = anchors
    self.commonNames = Set(commonNames)
    self.dnsNames = Set(dnsNames.map(Self.asciiLowercased))
    self.uris = Set(uris)
  }

  /// DNS names compare without ASCII case only (RFC 4343): Unicode case
  /// folding would let a name with U+212A KELVIN SIGN match one with `k`.
  static func asciiLowercased(_ name: String) -> String {
    String(decoding: name.utf8.map { (0x41...0x5a).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
  }

  var restrictsNames: Bool { !commonNames.isEmpty || !dnsNames.isEmpty || !uris.isEmpty }

  /// Whether a verified leaf carries an allowed name (or no names are required).
  func allows(_ leaf: X509Certificate) -> Bool {
    guard restrictsNames else { return true }
    if let cn = leaf.commonName, commonNames.contains(cn) { return true }
    let names = leaf.subjectAlternativeNames()
    if names.dns.contains(where: { dnsNames.contains(Self.asciiLowercased($0)) }) { return true }
    return leaf.uniformResourceIdentifiers().contains(where: uris.contains)
  }

  /// Installs the requirement on a server context: trust points, the CA
  /// names sent in the CertificateRequest, the callback and its slot.
  func install(on context: OpaquePointer) {
    let store = SSL_CTX_get_cert_store(context)
    for anchor in anchors {
      _ = X509_STORE_add_cert(store, anchor.pointer)
      _ = SSL_CTX_add_client_CA(context, anchor.pointer)
    }
    // The configured CA may be an intermediate: trust stops there.
    _ = X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(context), UInt(X509_V_FLAG_PARTIAL_CHAIN))
    _ = SSL_CTX_set_purpose(context, X509_PURPOSE_SSL_CLIENT)
    // Sessions of a verified client may be resumed only under this context.
    let name = Array("pinproxy-client-certificate".utf8)
    _ = SSL_CTX_set_session_id_context(context, name, UInt32(name.count))
    _ = SSL_CTX_set_ex_data(context, requirementSlot, Unmanaged.passUnretained(self).toOpaque())
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verifyClientCertificate)
  }
}

/// What became of one client's certificate, for the `refused` log line.
public final class ClientCertificateReport: @unchecked Sendable {
  /// `subject sha256/PIN` of the client's leaf, when it sent one.
  public internal(set) var certificate: String?
  /// Why it was refused: OpenSSL's verification error, or the names.
  public internal(set) var problem: String?

  init() {}
}

let requirementSlot = pp_SSL_CTX_new_ex_index()
let reportSlot = pp_SSL_new_ex_index()

/// Called by OpenSSL for each certificate of the client's path (root
/// first, leaf last). Fail closed: anything it cannot find refuses.
private let verifyClientCertificate: @convention(c) (Int32, OpaquePointer?) -> Int32 = { preverified, store in
  guard let store, let sslPointer = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx())
  else { return 0 }
  let ssl = OpaquePointer(sslPointer)
  guard let context = SSL_get_SSL_CTX(ssl), let slot = SSL_CTX_get_ex_data(context, requirementSlot) else {
    return 0
  }
  let requirement = Unmanaged<ClientCertificateRequirement>.fromOpaque(slot).takeUnretainedValue()
  let report = SSL_get_ex_data(ssl, reportSlot).map {
    Unmanaged<ClientCertificateReport>.fromOpaque($0).takeUnretainedValue()
  }
  if let report, report.certificate == nil, let leaf = X509_STORE_CTX_get0_cert(store) {
    let value = X509Certificate(retaining: leaf).value()
    report.certificate = "\(value.subject) \(value.spkiPin)"
  }
  guard preverified == 1 else {
    let error = X509_STORE_CTX_get_error(store)
    report?.problem = String(cString: X509_verify_cert_error_string(Int(error)))
    return 0
  }
  guard X509_STORE_CTX_get_error_depth(store) == 0 else { return 1 }
  guard let current = X509_STORE_CTX_get_current_cert(store),
    requirement.allows(X509Certificate(retaining: current))
  else {
    report?.problem = "its names are not among the listener's allowedClientNames"
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION)
    return 0
  }
  return 1
}

extension X509Certificate {
  /// The uniformResourceIdentifier entries of subjectAltName (SPIFFE IDs among them).
  func uniformResourceIdentifiers() -> [String] {
    guard let names = pp_X509_subject_alt_names(pointer) else { return [] }
    defer { pp_GENERAL_NAMES_free(names) }
    return Self.uniformResourceIdentifiers(in: names)
  }
}

extension ClientCertificateReport {
  /// Why the handshake refused the client, when its certificate (or the
  /// lack of one) is the reason; nil when the handshake failed otherwise.
  public func refusalReason(for failure: TLSEngine.Failure) -> String? {
    if let problem { return "client certificate refused: \(problem)" }
    guard failure.reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE else { return nil }
    return "the client sent no certificate; the listener requires one issued by downstreamClientCA"
  }
}
