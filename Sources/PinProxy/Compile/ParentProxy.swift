import Foundation
import PinConfig
import PinTLS

/// A parent proxy as the dialer uses it: where it is, how to ask it for a
/// tunnel, and its credentials, read from `credentialsFile` when the
/// configuration is loaded (at start and on every reload). The credentials
/// never appear in a log line, on the page or in an error: `description`
/// is the name and the URL only.
final class ParentProxy: Sendable, CustomStringConvertible {
  /// How a tunnel is asked for (`ParentTunnel`).
  enum Kind: Sendable, Equatable {
    case http
    case socks5
  }

  struct Credentials: Sendable, Equatable {
    let user: [UInt8]
    let password: [UInt8]
  }

  let name: String
  let kind: Kind
  let host: String
  let port: Int
  let credentials: Credentials?
  /// `scheme://host:port`, for logs and the page.
  let url: String

  static let maximumCredentialsBytes = 4096

  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  init(_ config: ParentProxyConfig) throws(Failure) {
    name = config.name
    kind = config.kind == .http ? .http : .socks5
    host = config.host
    port = config.port
    url = config.url
    guard let file = config.credentialsFile else {
      credentials = nil
      return
    }
    credentials = try Self.readCredentials(file.path, for: config.kind)
  }

  var description: String { "parent proxy \(name) (\(url))" }

  /// One line `user:password` (the first colon separates them), in a file
  /// only its owner may read: a secret readable by others is refused, as
  /// ssh refuses a private key that is.
  static func readCredentials(_ path: String, for kind: ParentProxyConfig.Kind) throws(Failure)
    -> Credentials
  {
    var status = stat()
    guard stat(path, &status) == 0 else {
      throw Failure(description: "credentials file \(path): \(String(cString: strerror(errno)))")
    }
    guard status.st_mode & 0o077 == 0 else {
      throw Failure(
        description:
          "credentials file \(path) may be read or written by group or others (mode "
          + "\(String(status.st_mode & 0o777, radix: 8))): chmod 600 it")
    }
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: maximumCredentialsBytes)
    } catch {
      throw Failure(description: "credentials file \(path): \(error.description)")
    }
    var line = bytes[...]
    while let last = line.last, last == 0x0a || last == 0x0d { line = line.dropLast() }
    guard !line.contains(0x0a), !line.contains(0x0d), let colon = line.firstIndex(of: UInt8(ascii: ":"))
    else {
      throw Failure(description: "credentials file \(path) must hold one line user:password")
    }
    let user = Array(line[..<colon])
    let password = Array(line[(colon + 1)...])
    let limit = kind == .socks5 ? 255 : 1024
    guard (1...limit).contains(user.count), (1...limit).contains(password.count),
      (user + password).allSatisfy({ $0 >= 0x20 && $0 != 0x7f })
    else {
      throw Failure(
        description:
          "credentials file \(path): the user and the password must each be 1 to \(limit) printable bytes")
    }
    return Credentials(user: user, password: password)
  }
}
