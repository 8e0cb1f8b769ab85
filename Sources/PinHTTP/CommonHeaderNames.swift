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

  /// The same for a name the proxy writes itself (`Via`, `Content-Length`, …).
  static func shared(_ name: String) -> [UInt8] {
    let count = name.utf8.count
    for candidate in names where candidate.count == count && candidate.elementsEqual(name.utf8) {
      return candidate
    }
    return Array(name.utf8)
  }

  /// The shared array when `bytes` spell a common name exactly, else a copy.
  static func shared(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
    for name in names where name.count == bytes.count && name.elementsEqual(bytes) { return name }
    return Array(bytes)
  }
}
