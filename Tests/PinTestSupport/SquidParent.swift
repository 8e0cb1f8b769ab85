import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A real Squid (Debian's `squid-openssl`) on a free loopback port, as the
/// parent proxy of a test: Basic credentials checked by `basic_ncsa_auth`
/// when `user` is given, names resolved from its own hosts file (the test
/// origins are all on 127.0.0.1), CONNECT to any port. `inspecting` makes it
/// an ssl-bump parent: it answers the CONNECT, then terminates the TLS
/// inside with a leaf it mints under its own CA (`inspectionCA`) — what a
/// company's TLS-inspecting proxy does with a CA installed on its machines.
public final class SquidParent {
  public let port: Int
  public let directory: String
  let process: Process

  /// The inspecting parent's CA certificate (PEM), for an anchor set.
  public var inspectionCA: String { directory + "/inspection-ca.pem" }
  /// What Squid logged: a tunnel is logged when it ends.
  public var accessLog: String {
    (try? String(contentsOfFile: directory + "/access.log", encoding: .utf8)) ?? ""
  }

  public init(
    names: [String] = ["httpbin.org"], user: String? = nil, password: String? = nil, inspecting: Bool = false
  ) throws {
    directory = NSTemporaryDirectory() + "squid-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    // Squid drops to its own user: it reads its files and writes its logs here.
    chmod(directory, 0o777)
    port = try OpenSSLServer.freePort()
    try ("127.0.0.1 " + names.joined(separator: " ") + "\n").write(
      toFile: directory + "/hosts", atomically: true, encoding: .utf8)
    var lines = [
      "http_port 127.0.0.1:\(port)", "pid_filename \(directory)/squid.pid",
      "cache_log \(directory)/cache.log",
      "access_log \(directory)/access.log", "cache deny all", "pinger_enable off",
      "shutdown_lifetime 0 seconds", "coredump_dir \(directory)", "hosts_file \(directory)/hosts",
    ]
    if let user, let password {
      let hashed = try Subprocess.run("/usr/bin/htpasswd", ["-nbm", user, password])
      try hashed.stdout.write(toFile: directory + "/passwd", atomically: true, encoding: .utf8)
      lines += [
        "auth_param basic program /usr/lib/squid/basic_ncsa_auth \(directory)/passwd",
        "acl authenticated proxy_auth REQUIRED", "http_access allow authenticated", "http_access deny all",
      ]
    } else {
      lines += ["http_access allow all"]
    }
    if inspecting {
      let key = directory + "/inspection-ca.key"
      let inspectionCA = directory + "/inspection-ca.pem"
      let made = try Subprocess.run(
        "/usr/bin/openssl",
        [
          "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
          "-subj", "/CN=Corp Inspection CA", "-keyout", key, "-out", inspectionCA,
          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
      guard made.status == 0 else { throw HarnessError("openssl req: \(made.stderr)") }
      let database = directory + "/ssl_db"
      let initialised = try Subprocess.run(
        "/usr/lib/squid/security_file_certgen", ["-c", "-s", database, "-M", "4MB"])
      guard initialised.status == 0 else {
        throw HarnessError("security_file_certgen: \(initialised.stderr)")
      }
      lines[0] += " ssl-bump generate-host-certificates=on tls-cert=\(inspectionCA) tls-key=\(key)"
      lines += [
        "sslcrtd_program /usr/lib/squid/security_file_certgen -s \(database) -M 4MB", "sslcrtd_children 2",
        "acl step1 at_step SslBump1", "ssl_bump peek step1", "ssl_bump bump all",
        "tls_outgoing_options flags=DONT_VERIFY_PEER", "sslproxy_cert_error allow all",
      ]
    }
    _ = try Subprocess.run("/bin/chmod", ["-R", "a+rwX", directory])
    try (lines.joined(separator: "\n") + "\n").write(
      toFile: directory + "/squid.conf", atomically: true, encoding: .utf8)
    guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/squid") else {
      throw HarnessError("squid is not installed (scripts/install-deps.sh installs squid-openssl)")
    }
    let directory = directory
    process = try launchListening("/usr/sbin/squid", ["-N", "-f", directory + "/squid.conf"], port: port) {
      "squid did not start: \((try? String(contentsOfFile: directory + "/cache.log", encoding: .utf8)) ?? "")"
    }
  }

  /// How many tunnels to `host` Squid has logged (once each has ended).
  public func connects(to host: String) -> Int {
    accessLog.components(separatedBy: "CONNECT \(host)").count - 1
  }

  /// Waits until Squid logged at least `count` tunnels to `host`.
  public func waitForConnects(to host: String, count: Int = 1, timeout: Double = 5) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if connects(to: host) >= count { return true }
      usleep(50_000)
    }
    return connects(to: host) >= count
  }

  public func stop() {
    if process.isRunning {
      process.terminate()
      process.waitUntilExit()
    }
  }

  deinit {
    stop()
    try? FileManager.default.removeItem(atPath: directory)
  }
}

/// microsocks (Debian's package) on a free loopback port, as a SOCKS5
/// parent: RFC 1929 credentials when `user` is given, names resolved by the
/// system (here only `localhost`), addresses taken as they are.
public final class SocksParent {
  public let port: Int
  let process: Process

  public init(user: String? = nil, password: String? = nil) throws {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/microsocks") else {
      throw HarnessError("microsocks is not installed (scripts/install-deps.sh installs it)")
    }
    port = try OpenSSLServer.freePort()
    let credentials = user.flatMap { user in password.map { ["-u", user, "-P", $0] } } ?? []
    process = try launchListening(
      "/usr/bin/microsocks", ["-i", "127.0.0.1", "-p", String(port)] + credentials, port: port
    ) { "microsocks did not start" }
  }

  public func stop() {
    if process.isRunning {
      process.terminate()
      process.waitUntilExit()
    }
  }

  deinit { stop() }
}

/// Starts `path` and waits until `port` takes connections; a program that
/// never listens is stopped and `failure` says why.
func launchListening(_ path: String, _ arguments: [String], port: Int, failure: () -> String) throws
  -> Process
{
  let process = Process()
  process.executableURL = URL(fileURLWithPath: path)
  process.arguments = arguments
  process.standardOutput = FileHandle.nullDevice
  process.standardError = FileHandle.nullDevice
  try process.run()
  for _ in 0..<200 {
    if OpenSSLServer.canConnect(port: port) { return process }
    usleep(25_000)
  }
  process.terminate()
  process.waitUntilExit()
  throw HarnessError(failure())
}
