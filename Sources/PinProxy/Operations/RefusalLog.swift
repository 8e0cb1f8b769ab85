import Foundation
import PinTrust
import Synchronization

/// One refusal as the operator's page shows it: who, what, which rule, the
/// code and reason, and the chain the origin presented with which pins and
/// anchors the rule expected. Values a client or origin chose are stored as
/// they came and escaped where they are written (HTML, terminal, JSON).
struct RecordedRefusal: Sendable, Codable {
  /// Shared by the log line, the answer the client got and the page.
  let incident: String
  let time: Date
  let client: String
  /// The admission key of the client (`ClientOrigin.key`): a client holding
  /// too many entries loses its own oldest first.
  let clientKey: String
  let listener: String?
  let method: String
  /// `host:port` the request was for, `-` when not known.
  let host: String
  /// The request path, its query removed unless `logging.queryStrings`.
  let path: String?
  let userAgent: String?
  let rule: String
  let code: String
  let status: Int
  let reason: String
  /// The presented chain, leaf first (at most `RefusalLog.maxCertificates`).
  let chain: [PresentedCertificate]
  /// What the rule expected, as configured when the refusal happened.
  let expected: RuleExpectation?
  /// For a pin failure on an otherwise valid chain: what to do, and the
  /// key's YAML line with the new pin (`PinRotationAdvice`).
  var advice: String? = nil
  var adviceYAML: String? = nil
  /// For a client on this host: the user owning its socket, its program.
  var clientUser: String? = nil
  var clientProgram: String? = nil
}

/// A presented certificate as the page lists it.
struct PresentedCertificate: Sendable, Codable {
  let subject: String
  let issuer: String
  let notBefore: Date
  let notAfter: Date
  /// `sha256/BASE64` of its SubjectPublicKeyInfo: what a publicKey pin is.
  let pin: String
  /// SHA-256 of the whole certificate, base64: what a certificate pin is.
  let certificateSHA256: String
  /// Whether it carries one of the rule's configured pins.
  let meetsPin: Bool
  /// Not sent by the server: the anchor the path was built to.
  var unsent = false

  /// The anchor a refusal's reason names, which the server did not send.
  init(unsent certificate: Certificate, expected: RuleExpectation?) {
    self.init(certificate, expected: expected)
    unsent = true
  }

  init(_ certificate: Certificate, expected: RuleExpectation?) {
    subject = certificate.subject
    issuer = certificate.issuer
    notBefore = certificate.notBefore
    notAfter = certificate.notAfter
    pin = certificate.spkiPin
    certificateSHA256 = certificate.fingerprint.base64
    let mode = PinningMode(rawValue: expected?.pinningMode ?? "none") ?? .none
    meetsPin = expected?.pins.contains(PinHealth.pin(of: certificate, mode: mode)) ?? false
  }
}

/// A rule's trust expectations: what a presented chain failed to meet.
struct RuleExpectation: Sendable, Codable, Equatable {
  let pinningMode: String
  /// In the mode's terms (`PinHealth.pins(of:)`).
  let pins: [String]
  /// Anchor set names (`system` is the operating system's store).
  let anchors: [String]
  let dynamicList: Bool
}

extension RuleExpectation {
  init(_ rule: CompiledRule) {
    let policy = rule.policy.policy
    self.init(
      pinningMode: policy.pinningMode.rawValue, pins: PinHealth.pins(of: policy), anchors: policy.anchors,
      dynamicList: rule.pinStore != nil)
  }
}

/// The last refusals, oldest to newest, at most `capacity`; and the
/// expectations of the rules in force, to record with each. Refusals are
/// not the fast path: one lock.
///
/// Bounded per client too, but only when clients compete for the room:
/// when the log is full, a client holding more than `perClient` entries
/// loses its own oldest first (the one holding most), so a client that
/// provokes refusals by the thousand cannot push everyone else's off the
/// operator's page; otherwise the oldest entry goes. On a loopback
/// deployment every refusal has one client key, and the page then holds
/// all `capacity` of them.
final class RefusalLog: Sendable {
  static let capacity = 100
  static let perClient = 20
  static let maxCertificates = 8
  private struct State {
    var entries: [RecordedRefusal] = []
    /// Each entry's client key (`ClientKey`), in the same order.
    var keys: [String] = []
    var expectations: [String: RuleExpectation] = [:]
  }
  private let state = Locked(State())

  /// The rules of the configuration now in force (at start and each reload).
  func rulesChanged(_ expectations: [String: RuleExpectation]) {
    state.withLock { $0.expectations = expectations }
  }

  func expectation(of rule: String) -> RuleExpectation? { state.withLock { $0.expectations[rule] } }

  func record(_ refusal: RecordedRefusal) {
    let key = refusal.clientKey
    state.withLock { state in
      if state.entries.count >= RefusalLog.capacity {
        var held: [String: Int] = [:]
        for key in state.keys { held[key, default: 0] += 1 }
        let most = held.max { $0.value < $1.value }
        let victim: Int
        if let most, most.value > RefusalLog.perClient {
          victim = state.keys.firstIndex(of: most.key)!
        } else {
          victim = 0
        }
        state.entries.remove(at: victim)
        state.keys.remove(at: victim)
      }
      state.entries.append(refusal)
      state.keys.append(key)
    }
  }

  /// Newest first.
  func recent(_ limit: Int = RefusalLog.capacity) -> [RecordedRefusal] {
    state.withLock { Array($0.entries.reversed().prefix(limit)) }
  }

  /// A new incident id: 12 hex digits, random, so that ids from restarts
  /// and other instances do not collide in a log search.
  static func incidentID() -> String {
    let value = UInt64.random(in: 0..<(1 << 48))
    let text = String(value, radix: 16)
    return String(repeating: "0", count: 12 - text.count) + text
  }
}
