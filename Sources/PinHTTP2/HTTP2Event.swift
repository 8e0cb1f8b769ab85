import PinHTTP

/// One header field of an HTTP/2 header block, as bytes (names are compared
/// as bytes; HPACK has already lower-cased nothing and validated nothing
/// beyond what nghttp2's messaging checks enforce).
public struct HTTP2Header: Sendable, Equatable {
  public var name: [UInt8]
  public var value: [UInt8]

  public init(_ name: String, _ value: String) {
    self.name = Array(name.utf8)
    self.value = Array(value.utf8)
  }

  public init(name: [UInt8], value: [UInt8]) {
    self.name = name
    self.value = value
  }
}

/// What the peer did, as a value: the session above decides what it means.
public enum HTTP2Event: Sendable, Equatable {
  /// A complete header block (HEADERS and any CONTINUATION): request or
  /// response headers, or trailers.
  case headers(stream: Int32, [HTTP2Header])
  /// Body bytes of a stream (DATA payload, padding removed).
  case data(stream: Int32, [UInt8])
  /// The peer ended its side of the stream (END_STREAM).
  case endStream(stream: Int32)
  /// The stream is gone: closed normally (error code 0) or reset by either
  /// side (RST_STREAM, or nghttp2 refusing a malformed message).
  case streamClosed(stream: Int32, errorCode: UInt32)
  /// The peer will start no stream above `lastStreamID`.
  case goAway(lastStreamID: Int32, errorCode: UInt32)
  /// The peer's SETTINGS, of which the session above needs this one.
  case settings(maxConcurrentStreams: UInt32?)
  /// The peer answered our PING.
  case pingAcknowledged
  /// A header block (request, response or trailers) went past the field
  /// count or the header list size while it was decoded; the stream was
  /// reset and nothing of the block is delivered.
  case oversizedHeaders(stream: Int32)
  /// nghttp2 refused something the peer sent (a malformed header field, a
  /// frame out of place); the stream or connection was reset for it.
  case refused(stream: Int32)
}

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7) that the proxy uses.
public enum HTTP2ErrorCode {
  public static let noError: UInt32 = 0x0
  public static let protocolError: UInt32 = 0x1
  public static let internalError: UInt32 = 0x2
  public static let flowControlError: UInt32 = 0x3
  public static let refusedStream: UInt32 = 0x7
  public static let cancel: UInt32 = 0x8
  public static let enhanceYourCalm: UInt32 = 0xb
}

/// Flow-control windows and flood bounds of one session.
public struct HTTP2Limits: Sendable, Equatable {
  /// SETTINGS_INITIAL_WINDOW_SIZE we advertise: what a peer may send on one
  /// stream before the reader takes it.
  public var streamWindow: UInt32 = 1 << 20
  /// The connection-wide receive window (all streams together).
  public var connectionWindow: UInt32 = 16 << 20
  /// RST_STREAMs a peer may send in a burst, then per second (rapid reset).
  public var resetBurst: UInt64 = 200
  public var resetsPerSecond: UInt64 = 33
  /// CONTINUATION frames allowed after one HEADERS frame.
  public var maxContinuations = 8
  /// Header fields in one received block (the HTTP/1.1 parser's `maxHeaderCount`).
  public var maxHeaderFields = 100

  public init() {}

  /// The defaults, with the header field count an HTTP/1.1 message gets.
  public init(headerLimits: HTTPLimits) {
    maxHeaderFields = headerLimits.maxHeaderCount
  }
}
