/// Why a message was refused, with the status the proxy answers with.
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
  public enum Kind: Sendable, Equatable {
    /// 400: malformed, or a request-smuggling shape.
    case badRequest
    /// 431: the head is too large or has too many fields.
    case headersTooLarge
    /// 414: the request target is too long.
    case uriTooLong
    /// 505: not HTTP/1.0 or HTTP/1.1.
    case versionNotSupported
    /// The peer closed in the middle of a message.
    case truncated
  }

  public let kind: Kind
  public let reason: String

  public init(_ kind: Kind, _ reason: String) {
    self.kind = kind
    self.reason = reason
  }

  /// The status a proxy answers a client with for this error.
  public var status: Int {
    switch kind {
    case .badRequest, .truncated: return 400
    case .headersTooLarge: return 431
    case .uriTooLong: return 414
    case .versionNotSupported: return 505
    }
  }

  public var description: String { "\(status): \(reason)" }
}

/// Size limits for message heads (defaults match the DESIGN config defaults).
public struct HTTPLimits: Sendable, Equatable {
  public var maxHeaderBytes = 64 * 1024
  public var maxHeaderCount = 100
  public var maxURILength = 8 * 1024

  public init(maxHeaderBytes: Int = 64 * 1024, maxHeaderCount: Int = 100, maxURILength: Int = 8 * 1024) {
    self.maxHeaderBytes = maxHeaderBytes
    self.maxHeaderCount = maxHeaderCount
    self.maxURILength = maxURILength
  }
}
