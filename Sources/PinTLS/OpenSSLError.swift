import COpenSSL

/// Drains OpenSSL's thread-local error queue into one readable line. Call it
/// right after a failing OpenSSL call, on the same thread.
enum OpenSSLErrorQueue {
  static func drain() -> String {
    var messages: [String] = []
    while true {
      let code = ERR_get_error()
      if code == 0 { break }
      var buffer = [CChar](repeating: 0, count: 256)
      ERR_error_string_n(code, &buffer, buffer.count)
      messages.append(
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return messages.isEmpty ? "unknown OpenSSL error" : messages.joined(separator: "; ")
  }

  /// Empties the queue before a call whose failure is read from it
  /// (`SSL_get_error` consults `ERR_peek_error`). Peeked first: clearing an
  /// already empty queue still walks all its slots, three times a request
  /// on the keep-alive path (SSL_read, SSL_write).
  static func clear() {
    if ERR_peek_error() != 0 { ERR_clear_error() }
  }
}
