import ArgumentParser
import Foundation
import PinConfig
import PinHTTP
import PinProxy
import PinTLS
import PinTrust

struct EvaluateCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "evaluate",
    abstract: "Decide whether a policy trusts a certificate chain for a host.",
    discussion: """
      Prints `trusted` (exit 0) or `rejected: <code>: <reason>` (exit 1); usage errors exit 2.
      The policy is the domain rule that matches --host in --config, or the policy flags
      (AFSecurityPolicy's defaults when none are given).
      """)

  @Option(name: .long, help: "The host the chain is for.")
  var host: String?

  @Flag(name: .long, help: "Evaluate with no host, as AFSecurityPolicy does with a nil domain.")
  var noHost = false

  @Option(name: .long, help: "PEM or DER file with the chain as the server sends it, leaf first.")
  var chain: String

  @Option(name: .long, help: "Use the domain rule that matches the host in this configuration file.")
  var config: String?

  @Option(
    name: .long,
    help: """
      With --config: a candidate SPKI pin (sha256/BASE64) added to the public-key pins of the rule that \
      matches --host, to try a fix before editing the file. Repeatable.
      """)
  var addPin: [String] = []

  @Option(name: .long, help: "Evaluate at this instant (ISO 8601, e.g. 2026-06-01T00:00:00Z) instead of now.")
  var at: String?

  @Option(name: .long, help: "none | certificate | publicKey")
  var pinningMode: String?

  @Option(name: .long, help: "A pinned certificate file (DER or PEM). Repeatable.")
  var pinnedCertificate: [String] = []

  @Option(name: .long, help: "A pinned SPKI hash, sha256/BASE64. Repeatable.")
  var pinnedPublicKeyHash: [String] = []

  @Flag(name: .long, help: "Accept chains that do not validate against the anchors.")
  var allowInvalidCertificates = false

  @Flag(name: .long, help: "Do not check the host name or serverAuth usage.")
  var noValidatesDomainName = false

  @Option(name: .long, help: "An anchor file; replaces the system store. Repeatable.")
  var anchors: [String] = []

  @Option(
    name: .long,
    help: """
      SCTs as a server would send them in the TLS extension: a PEM SERVERINFO FOR CT file \
      (what openssl s_server -serverinfo reads) or a TLS-encoded SCT list. Repeatable. \
      SCTs embedded in the leaf are always read.
      """)
  var sctFile: [String] = []

  @Option(name: .long, help: "Require certificate transparency against this CT log list (JSON, schema v3).")
  var ctLogList: String?

  @Option(name: .long, help: "With --ct-log-list: valid SCTs required from distinct logs (default 2).")
  var minimumScts: Int?

  @Option(
    name: .long,
    help: """
      A CRL (DER or PEM) beside the anchor sets' own, as `anchorSets.NAME.crls` would supply it. \
      Repeatable. A CRL with a defect of its own (no or a critical CRLNumber, expired) is exit 2.
      """)
  var crl: [String] = []

  @Option(
    name: .long, help: "An OCSP response (DER), judged as if the server had stapled it to the handshake.")
  var ocspResponse: String?

  var usesPolicyFlags: Bool {
    pinningMode != nil || !pinnedCertificate.isEmpty || !pinnedPublicKeyHash.isEmpty
      || allowInvalidCertificates || ctLogList != nil || minimumScts != nil
      || noValidatesDomainName || !anchors.isEmpty
  }

  func validate() throws {
    if host != nil && noHost { throw ValidationError("give --host or --no-host, not both") }
    if host == nil && !noHost { throw ValidationError("--host HOST is required (or --no-host)") }
    if config != nil && usesPolicyFlags {
      throw ValidationError("--config and policy flags exclude each other")
    }
    if minimumScts != nil && ctLogList == nil { throw ValidationError("--minimum-scts needs --ct-log-list") }
    if let minimumScts, !(1...16).contains(minimumScts) {
      throw ValidationError("--minimum-scts must be 1 to 16")
    }
    if config != nil && noHost {
      throw ValidationError("--config picks the rule by host; --no-host needs policy flags")
    }
    if !addPin.isEmpty && config == nil { throw ValidationError("--add-pin adds to a rule of --config") }
  }

  func run() throws {
    let time = try evaluationTime()
    let trustHost = try host.map { text in
      guard let parsed = TrustHost(text) else {
        throw UsageError("--host \"\(text)\" is not a host name or IP address")
      }
      return parsed
    }
    let certificates = try InputFile.certificates(chain, flag: "--chain", expected: InputFile.Expected.chain)
    let sctLists = try sctFile.map { try InputFile.sctList($0, flag: "--sct-file") }
    let presented = PresentedChain(certificates.map(\.der))
    let (policy, dynamicPins, logs, label) = try resolvePolicy(host: trustHost)
    guard let policy else {
      print(
        "rejected: \(FailureCode.deniedByPolicy.rawValue): no domain rule matches \(host ?? "") and defaults.action is deny"
      )
      throw ExitCode(1)
    }
    var supplied: [CRLSet.Entry] = []
    for path in crl {
      do {
        supplied.append(CRLSet.Entry(path: path, crl: try CRLSet.load(path, at: time)))
      } catch {
        throw UsageError("--crl \(error)")
      }
    }
    let staple = try ocspResponse.map { path in
      do {
        return try BoundedFile.read(path, limit: OCSPResponseCheck.maximumBytes)
      } catch {
        throw UsageError("--ocsp-response \(path): \(error)")
      }
    }
    // Offline: what is at hand decides, as the daemon decides once a fetch failed.
    let revocation = RevocationInput(
      source: policy.revocation.adding(CRLSet(supplied)),
      settings: policy.policy.revocation, staple: staple, fetching: false)
    var decision = RuleEvaluator.evaluate(
      presented, host: trustHost, policy: policy.policy, dynamicPins: dynamicPins, verifier: policy,
      revocation: revocation, at: time)
    // The daemon counts SCTs after the chain is accepted; so does this.
    if decision.isTrusted, let logs,
      let failure = policy.transparencyFailure(certificates, evidence: .lists(sctLists), logs: logs, at: time)
    {
      decision = .rejected(failure)
    }
    // A reason quotes names from the certificate file: escaped like every
    // peer-controlled string before it reaches a terminal (PrintableText).
    print(PrintableText.escaped(decision.summary))
    if case .trusted(let acceptance) = decision {
      if let pinFailure = acceptance.waivedPinFailure {
        printError(
          PrintableText.escaped(
            "note: \(label) is report-only (report.enforce: false); would have refused: \(pinFailure.code.rawValue): \(pinFailure.reason)"
          ))
      }
      if let expired = acceptance.pinsExpired {
        printError(
          "note: the pins of \(label) expired on \(expired.formatted(.iso8601)) (pinsExpire) and were not enforced"
        )
      }
      if let softFailure = acceptance.revocationSoftFailure {
        printError(
          PrintableText.escaped(
            "note: \(label) has ocsp: softFail; accepted without an answer: \(softFailure)"))
      }
      if let waived = acceptance.waived {
        printError(
          PrintableText.escaped(
            "note: \(label) allows invalid certificates; accepted despite: \(waived.detail) (depth \(waived.depth))"
          )
        )
      }
      return
    }
    throw ExitCode(1)
  }

  func evaluationTime() throws -> Date {
    guard let at else { return Date() }
    if let date = ISO8601Instant.parse(at) { return date }
    throw UsageError("--at \"\(at)\" is not an ISO 8601 instant such as 2026-06-01T00:00:00Z")
  }

  /// The compiled policy (nil when the config denies the host), the rule's
  /// dynamic pin list as stored in the state directory (what the daemon
  /// would enforce after a restart), the CT logs when the rule requires
  /// transparency, and a label for notes.
  func resolvePolicy(host: TrustHost?) throws -> (
    CompiledPolicy?, DynamicPinRequirement?, CTLogStore?, String
  ) {
    if let config {
      var configuration = try InputFile.configuration(config)
      var snapshot = try compile(configuration)
      if !addPin.isEmpty {
        guard case .rule(let index, let domain, _) = snapshot.trust.route(host!) else {
          throw UsageError("--add-pin: no domain rule of \(config) matches \(host!)")
        }
        try Self.add(addPin, to: &configuration.domains[index])
        printError(
          "note: evaluating rule \(domain.domain) with \(addPin.joined(separator: ", ")) added (not written to \(config))"
        )
        snapshot = try compile(configuration)
      }
      switch snapshot.trust.route(host!) {
      case .rule(let index, let domain, let policy):
        let logs = domain.requiresCertificateTransparency ? snapshot.trust.transparency : nil
        return (policy, snapshot.dynamicPins(forRule: index), logs, "domain rule \(domain.domain)")
      case .defaults(let policy): return (policy, nil, nil, "defaults")
      case .denied: return (nil, nil, nil, "defaults")
      }
    }
    let logs = try ctLogList.map {
      try InputFile.logStore($0, flag: "--ct-log-list", minimumSCTs: minimumScts ?? 2)
    }
    return (try policyFromFlags(), nil, logs, "the policy")
  }

  func compile(_ configuration: Configuration) throws -> RuntimeSnapshot {
    do {
      return try RuntimeSnapshot.compile(
        configuration, generation: 1, warn: { printError(PrintableText.escaped("warning: \($0)")) })
    } catch {
      throw UsageError(error.errors.map(\.description).joined(separator: "\n"))
    }
  }

  /// Adds `pins` to every public-key pin list `rule` uses: its pin mode's
  /// (`publicKey`), and its ATS leaf or CA identities.
  static func add(_ pins: [String], to rule: inout DomainConfig) throws {
    let digests: [Digest256]
    do {
      digests = try pins.map { try SPKIPin.parse($0) }
    } catch {
      throw UsageError("--add-pin: \(error)")
    }
    var added = false
    if rule.pinningMode == .publicKey {
      rule.pinnedPublicKeyHashes += digests
      added = true
    }
    if !rule.pinnedLeafPublicKeyHashes.isEmpty {
      rule.pinnedLeafPublicKeyHashes += digests
      added = true
    }
    if !rule.pinnedCAPublicKeyHashes.isEmpty {
      rule.pinnedCAPublicKeyHashes += digests
      added = true
    }
    guard added else {
      throw UsageError(
        "--add-pin: rule \(rule.domain) pins no public keys (pinningMode \(rule.pinningMode.rawValue), no identities)"
      )
    }
  }

  func policyFromFlags() throws -> CompiledPolicy {
    var policy = SecurityPolicy.default
    if let pinningMode {
      guard let mode = PinningMode(rawValue: pinningMode) else {
        throw UsageError("--pinning-mode must be none, certificate or publicKey, not \"\(pinningMode)\"")
      }
      policy.pinningMode = mode
    }
    policy.pinnedCertificates = try pinnedCertificate.flatMap {
      try InputFile.certificates($0, flag: "--pinned-certificate", expected: InputFile.Expected.pinned)
    }.map { $0.value() }
    do {
      policy.pinnedPublicKeyHashes = try pinnedPublicKeyHash.map { try SPKIPin.parse($0) }
    } catch {
      throw UsageError("--pinned-public-key-hash: \(error)")
    }
    policy.allowInvalidCertificates = allowInvalidCertificates
    policy.validatesDomainName = !noValidatesDomainName
    var sets: [String: [X509Certificate]] = [:]
    if !anchors.isEmpty {
      sets["command-line"] = try anchors.flatMap {
        try InputFile.certificates($0, flag: "--anchors", expected: InputFile.Expected.anchors)
      }
      policy.anchors = ["command-line"]
    }
    do {
      return try CompiledPolicy(
        policy: policy, identity: PolicyIdentity(generation: 0, rule: .domain(0)),
        registry: AnchorSetRegistry(sets: sets))
    } catch {
      throw UsageError("\(error)")
    }
  }
}
