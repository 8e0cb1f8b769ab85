import FuzzSupport
import PinHTTP2

/// What both HTTP/2 targets share: the bounds their sessions are made with,
/// the way an input is cut into reads, and the property every delivered
/// header block must keep.
public enum HTTP2Fuzz {
  public static let maxFields = 100
  public static let maxListSize = 64 * 1024

  /// The limits both targets' sessions use.
  public static var limits: HTTP2Limits {
    var limits = HTTP2Limits()
    limits.maxHeaderFields = maxFields
    return limits
  }

  /// `payload` cut where the control bytes say (each byte a fraction of its length).
  public static func chunks(of payload: [UInt8], at control: ArraySlice<UInt8>) -> [[UInt8]] {
    let cuts = control.map { Int($0) * payload.count / 256 }.sorted()
    var pieces: [[UInt8]] = []
    var start = 0
    for cut in cuts + [payload.count] where cut > start {
      pieces.append(Array(payload[start..<cut]))
      start = cut
    }
    return pieces
  }

  /// No delivered block over the field count or the list size (RFC 9113
  /// §6.5.2: name + value + 32 per field).
  public static func checkHeaderBlock(_ fields: [HTTP2Header], stream: Int32) {
    require(fields.count <= maxFields, "stream \(stream): \(fields.count) header fields delivered")
    let listSize = fields.reduce(0) { $0 + $1.name.count + $1.value.count + 32 }
    require(listSize <= maxListSize, "stream \(stream): a header list of \(listSize) bytes delivered")
  }
}
