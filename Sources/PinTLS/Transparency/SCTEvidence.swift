import COpenSSL
import Foundation
import PinTrust

/// Where a certificate's SCTs come from: a completed handshake (OpenSSL
/// gathers all three channels of RFC 6962 §3.3: the certificate, the TLS
/// extension, the OCSP staple), or SCT lists given on the command line
/// (`pinproxy evaluate --sct-file`) beside those embedded in the leaf.
public enum SCTEvidence {
  case handshake(TLSEngine)
  /// TLS-encoded `SignedCertificateTimestampList`s, taken as if delivered in
  /// the TLS extension.
  case lists([[UInt8]])
}

extension CompiledPolicy {
  /// The `ct-required` refusal when the SCTs fall short of `logs`'
  /// requirement, nil when they meet it.
  /// - Parameter presented: the chain as the server sent it, leaf first.
  public func transparencyFailure(
    _ presented: [X509Certificate], evidence: SCTEvidence, logs: CTLogStore, at time: Date
  ) -> TrustFailure? {
    guard let leaf = presented.first else { return .emptyChain }
    let issuer = hasEmbeddedSCTs(leaf) ? self.issuer(of: presented, at: time) : nil
    var observations: [SCTObservation] = []
    switch evidence {
    case .handshake(let engine):
      observations = logs.observe(SSL_get0_peer_scts(engine.ssl), leaf: leaf, issuer: issuer, at: time)
    case .lists(let lists):
      if let embedded = pp_X509_embedded_scts(leaf.pointer) {
        Self.setSource(embedded, SCT_SOURCE_X509V3_EXTENSION)
        observations += logs.observe(embedded, leaf: leaf, issuer: issuer, at: time)
        SCT_LIST_free(embedded)
      }
      for list in lists {
        guard let parsed = Self.parseSCTList(list) else { continue }
        Self.setSource(parsed, SCT_SOURCE_TLS_EXTENSION)
        observations += logs.observe(parsed, leaf: leaf, issuer: issuer, at: time)
        SCT_LIST_free(parsed)
      }
    }
    return TransparencyCheck.evaluate(observations, requirement: logs.requirement).map {
      .certificateTransparency($0)
    }
  }

  private func hasEmbeddedSCTs(_ leaf: X509Certificate) -> Bool {
    X509_get_ext_by_NID(leaf.pointer, NID_ct_precert_scts, -1) >= 0
  }

  /// The leaf's issuer: a presented certificate whose key verifies the
  /// leaf's signature (one signature check, and it also finds an issuer a
  /// certificate-pinned rule trusts outside its anchors), else the issuer
  /// in the chain as built to the policy's anchors when a verified
  /// signature joins the two (a server that sent the leaf alone). Never one
  /// merely named: an embedded SCT signs the issuer's key hash, and a
  /// forged chain must not supply a key of its choosing.
  private func issuer(of presented: [X509Certificate], at time: Date) -> X509Certificate? {
    guard let leaf = presented.first else { return nil }
    let signer = presented.dropFirst().first { candidate in
      guard X509_check_issued(candidate.pointer, leaf.pointer) == X509_V_OK,
        let key = X509_get0_pubkey(candidate.pointer)
      else { return false }
      defer { OpenSSLErrorQueue.clear() }
      return X509_verify(leaf.pointer, key) == 1
    }
    if let signer { return signer }
    let verification = verify(
      PresentedChain(presented.map(\.der)), anchors: .policyAnchors, purpose: .basicX509, at: time
    ) { _ in nil }
    guard verification.builtChain.count >= 2, verification.isValid || verification.signatureLinkedCount >= 2
    else { return nil }
    return try? X509Certificate(der: verification.builtChain[1].der)
  }

  /// The source decides what an SCT is signed over (precertificate or
  /// certificate), so SCTs read from a file or extension are marked with it.
  static func setSource(_ list: OpaquePointer, _ source: sct_source_t) {
    for index in 0..<pp_sk_SCT_num(list) {
      if let sct = pp_sk_SCT_value(list, index) { _ = SCT_set_source(sct, source) }
    }
  }

  static func parseSCTList(_ bytes: [UInt8]) -> OpaquePointer? {
    bytes.withUnsafeBufferPointer { buffer in
      var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
      return o2i_SCT_LIST(nil, &cursor, buffer.count)
    }
  }
}

/// An SCT list file for `--sct-file`: the PEM `SERVERINFO FOR CT` (or
/// `SERVERINFOV2 FOR CT`) that `openssl s_server -serverinfo` sends, or the
/// bare TLS-encoded `SignedCertificateTimestampList`. Anything else (random
/// bytes, text, one SCT without its list) is an error: read as SCTs it would
/// count as none and turn a wrong file into a `ct-required` verdict.
public enum SCTListFile {
  public struct LoadError: Error, CustomStringConvertible {
    public let path: String
    public let problem: String
    public var description: String { "\(path): \(problem)" }
  }

  /// A server sends a few SCTs; a list is at most 64 KiB by its encoding.
  static let maximumFileBytes = 256 << 10

  public static func load(_ path: String) throws(LoadError) -> [UInt8] {
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: maximumFileBytes)
    } catch {
      throw LoadError(path: path, problem: error.description)
    }
    do {
      return try parse(bytes)
    } catch {
      throw LoadError(path: path, problem: error.problem)
    }
  }

  /// The TLS-encoded list in `bytes`, checked SCT by SCT.
  static func parse(_ bytes: [UInt8]) throws(LoadError) -> [UInt8] {
    func fail(_ problem: String) -> LoadError { LoadError(path: "", problem: problem) }
    guard !bytes.isEmpty else { throw fail("the file is empty") }
    guard let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN SERVERINFO") else {
      if let problem = SCTListShape.problem(bytes) { throw fail(problem) }
      return bytes
    }
    let v2 = text.contains("-----BEGIN SERVERINFOV2")
    let body = text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    guard var info = Base64.decode(body.trimmingCharacters(in: .whitespacesAndNewlines)) else {
      throw fail("the SERVERINFO block is not base64")
    }
    if v2 { info = Array(info.dropFirst(4)) }  // the 4-byte extension context
    // Extension type (2 bytes), length (2 bytes), then the list.
    guard info.count >= 4, info[0] == 0, info[1] == 18 else {
      throw fail("not a signed_certificate_timestamp (type 18) SERVERINFO block")
    }
    let length = Int(info[2]) << 8 | Int(info[3])
    guard info.count == 4 + length else { throw fail("SERVERINFO length is wrong") }
    let list = Array(info[4...])
    if let problem = SCTListShape.problem(list) { throw fail("the SERVERINFO block's SCT list: \(problem)") }
    return list
  }
}

/// The RFC 6962 §3.3 encoding, checked before OpenSSL sees it, so that the
/// error can say what is wrong (and recognise one SCT given without its list).
enum SCTListShape {
  /// Why `bytes` is not a `SignedCertificateTimestampList`, or nil.
  static func problem(_ bytes: [UInt8]) -> String? {
    guard let problem = listProblem(bytes) else { return nil }
    if sctLength(bytes[...]) == bytes.count {
      return "one bare SCT (v1, log ID \(Base64.encode(Array(bytes[1..<33])))), not an SCT list: a list"
        + " is a 2-byte length, then each SCT after its own 2-byte length"
    }
    let printable = bytes.allSatisfy { $0 == 0x09 || $0 == 0x0a || $0 == 0x0d || (0x20..<0x7f).contains($0) }
    if printable {
      return "text without a -----BEGIN SERVERINFO FOR CT----- block, and not a binary SCT list"
    }
    return problem
  }

  static func listProblem(_ bytes: [UInt8]) -> String? {
    guard bytes.count >= 2 else { return "too short for an SCT list" }
    let declared = Int(bytes[0]) << 8 | Int(bytes[1])
    guard declared == bytes.count - 2, declared > 0 else {
      return
        "not an SCT list: its 2-byte length says \(declared) bytes follow, the file has \(bytes.count - 2)"
    }
    var rest = bytes[2...]
    var index = 0
    while !rest.isEmpty {
      guard rest.count >= 2 else { return "SCT \(index) is cut short" }
      let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
      let sct = rest.dropFirst(2).prefix(length)
      guard length > 0, sct.count == length, sctLength(sct) == length else {
        return "SCT \(index) is not a v1 SCT (version, log ID, timestamp, extensions, signature)"
      }
      rest = rest.dropFirst(2 + length)
      index += 1
    }
    guard let parsed = CompiledPolicy.parseSCTList(bytes) else {
      return "OpenSSL cannot read it as an SCT list"
    }
    SCT_LIST_free(parsed)
    return nil
  }

  /// The length of the v1 SCT at the start of `bytes`, when one is there:
  /// version 0, log ID (32), timestamp (8), extensions (2 + n), hash and
  /// signature algorithms (2), signature (2 + n, not empty).
  static func sctLength(_ bytes: ArraySlice<UInt8>) -> Int? {
    let start = bytes.startIndex
    func length(at offset: Int) -> Int? {
      guard bytes.count >= offset + 2 else { return nil }
      return Int(bytes[start + offset]) << 8 | Int(bytes[start + offset + 1])
    }
    guard bytes.first == 0, let extensions = length(at: 41) else { return nil }
    let signatureAt = 43 + extensions + 2
    guard let signature = length(at: signatureAt), signature > 0 else { return nil }
    let total = signatureAt + 2 + signature
    return bytes.count >= total ? total : nil
  }
}
