import Foundation
import XCTest

/// Network namespaces a test makes for itself (`ip netns`): addresses and
/// routes no other test sees, and no route out of the machine unless the
/// test adds one. Removed by the test's teardown.
public enum NetworkNamespace {
  public static let ip = "/usr/sbin/ip"

  /// A new namespace with its loopback up, then each of `setup` run as
  /// `ip -n NAMESPACE …` (or as `ip …` when it starts with "netns" or
  /// "link" and names the namespace itself).
  public static func make(for test: XCTestCase, prefix: String = "ppn", _ setup: [[String]] = []) throws
    -> String
  {
    guard FileManager.default.isExecutableFile(atPath: ip) else {
      throw HarnessError("\(ip) (iproute2) is required to create network namespaces")
    }
    let namespace = "\(prefix)-\(UUID().uuidString.prefix(6).lowercased())"
    try run(ip, ["netns", "add", namespace])
    test.addTeardownBlock {
      _ = try? Subprocess.run(ip, ["netns", "del", namespace])
      try? FileManager.default.removeItem(atPath: "/etc/netns/\(namespace)")
    }
    try run(ip, ["-n", namespace, "link", "set", "lo", "up"])
    for arguments in setup { try run(ip, ["-n", namespace] + arguments) }
    return namespace
  }

  /// A namespace whose loopback answers for all of 198.18.0.0/16 (an
  /// AnyIP `local` route): one process can connect from thousands of
  /// source addresses, or bind any of them.
  public static func withRoutedBlock(for test: XCTestCase, prefix: String = "ppa") throws -> String {
    try make(for: test, prefix: prefix, [["route", "add", "local", "198.18.0.0/16", "dev", "lo"]])
  }

  /// `/etc/hosts` as processes run by `ip netns exec` in `namespace` see it
  /// (iproute2 bind-mounts /etc/netns/NAME/hosts over /etc/hosts).
  public static func setHosts(_ namespace: String, _ text: String) throws {
    let directory = "/etc/netns/\(namespace)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/hosts"))
  }

  /// `arguments` run inside `namespace`, to the end.
  public static func exec(_ namespace: String, _ arguments: [String]) throws -> ProcessResult {
    try Subprocess.run(ip, ["netns", "exec", namespace] + arguments)
  }

  /// `arguments` started inside `namespace`, its standard output captured.
  public static func launch(_ namespace: String, _ arguments: [String]) throws -> ChildProcess {
    try ChildProcess(ip, ["netns", "exec", namespace] + arguments, captureStandardError: false)
  }

  /// The wrapper that starts a daemon inside `namespace` (`ProxyProcess(wrapper:)`).
  public static func wrapper(_ namespace: String) -> [String] { [ip, "netns", "exec", namespace] }

  private static func run(_ executable: String, _ arguments: [String]) throws {
    let result = try Subprocess.run(executable, arguments)
    guard result.status == 0 else {
      throw HarnessError("ip \(arguments.joined(separator: " ")) failed: \(result.stderr)")
    }
  }
}
