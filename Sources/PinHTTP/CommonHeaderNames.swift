/// Header names most messages carry, spelled as clients and origins send
/// them. A parsed name equal to one of these shares its storage instead of
/// allocating its own array: a response from nginx carries six to eight of
/// them, and each would otherwise be one allocation per message.
enum CommonHeaderNames {
  static let names: [[UInt8]] = [
    "Host", "User-Agent", "Accept", "Accept-Encoding", "Accept-Language", "Accept-Ranges", "Connection",
    "Content-Length", "Content-Type", "Content-Encoding", "Cache-Control", "Cookie", "Set-Cookie", "Date",
    "ETag", "Last-Modified", "Server", "Transfer-Encoding", "Keep-Alive", "Vary", "Via", "Location",
    "Authorization", "Origin", "Referer", "Expires", "Pragma", "X-Forwarded-For", "Upgrade",
  ].map { Array($0.utf8) }

  /// The shared array when `bytes` spell a common name exactly, else a
  /// copy: for parsed names and for the ones the proxy writes (`Via`, …).
  static func shared<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
    let count = bytes.count
    for name in names where name.count == count && name.elementsEqual(bytes) { return name }
    return Array(bytes)
  }
}
