import Foundation

/// Where pinproxy keeps state (the local CA): the config's `stateDirectory`,
/// else systemd's $STATE_DIRECTORY, else /var/lib/pinproxy.
public enum StateDirectory {
  public static var `default`: String {
    if let fromSystemd = ProcessInfo.processInfo.environment["STATE_DIRECTORY"], !fromSystemd.isEmpty {
      return fromSystemd.split(separator: ":").first.map(String.init) ?? fromSystemd
    }
    return "/var/lib/pinproxy"
  }

  public static func resolve(_ configured: String?) -> String { configured ?? self.default }

  /// The one-line hint for trusting the CA in a client.
  public static func installHint(_ directory: String) -> String {
    "curl --cacert \(directory)/ca.pem …, or: cp \(directory)/ca.pem /usr/local/share/ca-certificates/pinproxy.crt && update-ca-certificates"
  }
}
