import COpenSSL
import Foundation
import PinTrust

/// A CT log list in the JSON the browser vendors publish (schema v3):
/// operators, each with `logs` (and `tiled_logs`), each with a base64 DER
/// `key`, its `log_id` and a `state`. Only usable, qualified, readonly and
/// retired logs are kept; pending and rejected ones are not trusted.
public struct CTLogList: Sendable {
  /// Logs kept from one list.
  public static let maximumLogs = 1024
  public struct Entry: Sendable {
    public var log: CTLog
    /// The log's DER SubjectPublicKeyInfo, base64 as in the list.
    public var keyBase64: String
  }

  public var entries: [Entry]
  /// Logs left out because of their state, for `check` to mention.
  public var skipped: Int

  public struct ParseError: Error, CustomStringConvertible {
    public let description: String
  }

  private struct Document: Decodable {
    var operators: [Operator]
  }
  private struct Operator: Decodable {
    var name: String
    var logs: [Log]?
    var tiled_logs: [Log]?
  }
  private struct Log: Decodable {
    var description: String?
    var log_id: String
    var key: String
    var state: [String: StateInfo]?
  }
  private struct StateInfo: Decodable {
    var timestamp: String?
  }

  /// Reads and checks the list: every log ID must be the SHA-256 of its
  /// key, and every key a public key OpenSSL can use.
  public init(json: [UInt8]) throws(ParseError) {
    let document: Document
    do {
      document = try JSONDecoder().decode(Document.self, from: Data(json))
    } catch {
      throw ParseError(description: "not a CT log list (JSON schema v3 with operators and logs): \(error)")
    }
    var entries: [Entry] = []
    var skipped = 0
    var seen = Set<Digest256>()
    for op in document.operators {
      for log in (op.logs ?? []) + (op.tiled_logs ?? []) {
        let name = log.description ?? log.log_id
        guard let keyDER = Base64.decode(log.key), !keyDER.isEmpty else {
          throw ParseError(description: "log \"\(name)\": key is not base64")
        }
        let logID = SHA256.digest(keyDER)
        guard Digest256(base64: log.log_id) == logID else {
          throw ParseError(description: "log \"\(name)\": log_id is not the SHA-256 of its key")
        }
        guard Self.isPublicKey(keyDER) else {
          throw ParseError(description: "log \"\(name)\": key is not a DER SubjectPublicKeyInfo")
        }
        guard let state = try Self.state(log.state, name: name) else {
          skipped += 1
          continue
        }
        guard seen.insert(logID).inserted else { continue }
        // The published list has ~100 logs; each one costs a key and a line
        // of OpenSSL's configuration.
        guard entries.count < Self.maximumLogs else {
          throw ParseError(description: "more than \(Self.maximumLogs) logs")
        }
        entries.append(
          Entry(
            log: CTLog(logID: logID, description: name, operatorName: op.name, state: state),
            keyBase64: log.key))
      }
    }
    self.entries = entries
    self.skipped = skipped
  }

  private static func state(_ states: [String: StateInfo]?, name: String) throws(ParseError) -> CTLog.State? {
    guard let states, let (key, info) = states.first, states.count == 1 else { return nil }
    switch key {
    case "usable": return .usable
    case "qualified": return .qualified
    case "readonly": return .readonly
    case "retired":
      guard let text = info.timestamp, let date = ISO8601Instant.parse(text) else {
        throw ParseError(description: "log \"\(name)\": retired without a readable timestamp")
      }
      return .retired(date)
    default: return nil  // pending, rejected: not trusted
    }
  }

  static func isPublicKey(_ der: [UInt8]) -> Bool {
    der.withUnsafeBufferPointer { buffer in
      var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
      guard let key = d2i_PUBKEY(nil, &cursor, buffer.count) else { return false }
      EVP_PKEY_free(key)
      return true
    }
  }
}
