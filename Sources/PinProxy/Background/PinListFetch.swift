import Foundation
import PinEventLoop
import PinHTTP
import PinTrust

/// One fetch of a rule's list: the request (with a fresh challenge in
/// challenge mode), the response checks, the signature, the update rules.
/// Used by the daemon's updater and by `pinproxy pins update` alike. The
/// result is a verified outcome or a failure with a short reason for
/// metrics; nothing is installed here.
enum PinListFetch {
  struct Failure: Error, Sendable, CustomStringConvertible {
    /// `fetch`, `status`, `signature`, `parse`, `rollback`, `empty`.
    let reason: String
    let description: String
  }

  static let challengeHeader = "X-Cert-Pinning-Challenge"
  static let signatureHeader = "X-Cert-Pinning-Signature"

  /// Calls `completion` once, on `loop`'s queue.
  static func run(
    _ store: DynamicPinStore, dialer: UpstreamDialer, on loop: EventLoop,
    _ completion: @escaping @Sendable (Result<PinListUpdate.Outcome, Failure>) -> Void
  ) {
    let spec = store.spec
    var request = InternalRequest(url: spec.url, headers: [("Accept", "application/json")])
    var challenge = ""
    if spec.useChallenge {
      var generator = SystemRandomNumberGenerator()  // getrandom(2): a CSPRNG
      challenge = Base64.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
      request.headers.append((challengeHeader, challenge))
    }
    let sent = challenge
    InternalExchange.start(request, dialer: dialer, on: loop) { result in
      completion(
        result.mapError { Failure(reason: "fetch", description: "\($0.code.rawValue): \($0.reason)") }
          .flatMap { verify($0, store: store, challenge: sent, at: Date()) })
    }
  }

  static func verify(_ response: InternalResponse, store: DynamicPinStore, challenge: String, at time: Date)
    -> Result<PinListUpdate.Outcome, Failure>
  {
    let spec = store.spec
    guard response.status == 200 else {
      return .failure(Failure(reason: "status", description: "the list server answered \(response.status)"))
    }
    if spec.useChallenge {
      guard let text = response.headers.first(signatureHeader), let signature = Base64.decode(text) else {
        return .failure(
          Failure(reason: "signature", description: "the response has no base64 \(signatureHeader) header"))
      }
      let signed = Array((challenge + "&").utf8) + response.body
      guard spec.verifier.isValid(signature: signature, over: signed) else {
        return .failure(
          Failure(
            reason: "signature",
            description:
              "\(signatureHeader) does not verify over the challenge and the body with the configured publicKey"
          ))
      }
    }
    let document: PinListDocument
    do {
      document = try PinListDocument.parse(response.body, signedEntries: !spec.useChallenge)
    } catch {
      return .failure(Failure(reason: "parse", description: error.description))
    }
    return PinListUpdate.apply(
      document, verifier: spec.useChallenge ? nil : spec.verifier,
      expectedCommonNames: spec.expectedCommonNames,
      stored: store.snapshot.list, at: time
    ).mapError { Failure(reason: $0.reason, description: $0.description) }
  }

  /// What an update changed, for logs and `pinproxy pins update`.
  static func changes(from old: PinList, to new: PinList) -> (added: [PinListEntry], removed: [PinListEntry])
  {
    func key(_ entry: PinListEntry) -> String {
      "\(entry.name)&\(entry.fingerprint.base64)&\(entry.expiresSeconds)"
    }
    let before = Set(old.entries.map(key))
    let after = Set(new.entries.map(key))
    return (new.entries.filter { !before.contains(key($0)) }, old.entries.filter { !after.contains(key($0)) })
  }
}
