import Foundation

/// nginx as an HTTP/2 (and HTTP/1.1) TLS origin, the test leaf for
/// httpbin.org: `/small` answers a short text, `/status` is stub_status (its
/// `accepts` counts the TCP connections the proxy opened), files under the
/// root are served as they are, `/limited/` serves them at 256 KB/s, and
/// `/upload` passes POSTs to `echo` (a Python origin answering
/// "LENGTH SHA256"). Every request is logged with its protocol.
public final class NginxOrigin {
  public let port: Int
  public let directory: URL
  let child: ChildProcess

  public init(echo: Origin? = nil, extraServer: String = "") throws {
    guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
      throw HarnessError("nginx is not installed (scripts/install-deps.sh installs it)")
    }
    port = try OpenSSLServer.freePort()
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("nginx-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let root = directory.appendingPathComponent("root")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let path = directory.path
    let upload =
      echo.map {
        "location /upload { proxy_pass https://127.0.0.1:\($0.port)/upload; proxy_ssl_verify off; "
          + "client_max_body_size 0; proxy_request_buffering off; }"
      } ?? ""
    let config = """
      worker_processes 1;
      daemon off;
      pid \(path)/nginx.pid;
      error_log \(path)/error.log;
      events { worker_connections 1024; }
      http {
        log_format proto '$server_protocol $request_method $uri $status $body_bytes_sent';
        access_log \(path)/access.log proto;
        client_body_temp_path \(path);
        proxy_temp_path \(path);
        fastcgi_temp_path \(path);
        uwsgi_temp_path \(path);
        scgi_temp_path \(path);
        server {
          listen 127.0.0.1:\(port) ssl http2;
          ssl_certificate \(Fixtures.path("httpbin-chain.pem"));
          ssl_certificate_key \(Fixtures.path("httpbin.key"));
          root \(root.path);
          location /small { return 200 "hello over $server_protocol\\n"; }
          location /status { stub_status; }
          location /limited/ { alias \(root.path)/; limit_rate 256k; }
          \(upload)
          \(extraServer)
        }
      }
      """
    let file = directory.appendingPathComponent("nginx.conf")
    try config.write(to: file, atomically: true, encoding: .utf8)
    child = try ChildProcess("/usr/sbin/nginx", ["-c", file.path], captureStandardError: true)
    // Only the probe that connects is a connection nginx counts.
    var probes = 1
    while !OpenSSLServer.canConnect(port: port) {
      guard probes < 200 else { throw HarnessError("nginx did not start: \(child.currentOutput)") }
      probes += 1
      usleep(25_000)
    }
  }

  deinit { stop() }

  /// Writes a file of `size` pseudo-random bytes under the root; returns its path.
  @discardableResult
  public func file(_ name: String, size: Int) throws -> String {
    // Read from the kernel: a byte-by-byte loop of unoptimized test code
    // took seconds of CPU for the 50 MB files.
    guard let random = FileHandle(forReadingAtPath: "/dev/urandom") else {
      throw CocoaError(.fileReadUnknown)
    }
    defer { try? random.close() }
    let bytes = try random.read(upToCount: size) ?? Data()
    guard bytes.count == size else { throw CocoaError(.fileReadTooLarge) }
    let path = directory.appendingPathComponent("root/\(name)").path
    try bytes.write(to: URL(fileURLWithPath: path))
    return path
  }

  /// TCP connections nginx accepted so far (stub_status, asked directly
  /// over HTTP/1.1, which adds one).
  public func acceptedConnections() throws -> Int {
    let result = try Curl.run([
      "--http1.1", "--cacert", Fixtures.path("root-a.pem"), "--resolve", "httpbin.org:\(port):127.0.0.1",
      "https://httpbin.org:\(port)/status",
    ])
    let lines = result.text.split(separator: "\n")
    guard let index = lines.firstIndex(where: { $0.contains("accepts") }), index + 1 < lines.count,
      let accepts = Int(lines[index + 1].split(separator: " ").first ?? "")
    else { throw HarnessError("no stub_status in: \(result.text)") }
    // Less this request and the startup probe that connected.
    return accepts - 2
  }

  /// Access log lines: `PROTOCOL METHOD URI STATUS BYTES`.
  public var requests: [String] {
    let log = directory.appendingPathComponent("access.log").path
    return (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
  }

  /// The access log lines once `count` of them match, or as they are after
  /// `seconds`: nginx writes a request's line after it has sent the
  /// response, so a client that has read the answer may be ahead of it.
  public func requests(
    waitingFor count: Int, seconds: Double = 10, matching: (String) -> Bool
  ) -> [String] {
    let deadline = Date().addingTimeInterval(seconds)
    var lines = requests
    while lines.filter(matching).count < count && Date() < deadline {
      usleep(50_000)
      lines = requests
    }
    return lines
  }

  /// A graceful reload: the old worker sends GOAWAY on its HTTP/2
  /// connections and finishes the streams in progress.
  public func reload() throws {
    _ = try Subprocess.run(
      "/usr/sbin/nginx", ["-c", directory.appendingPathComponent("nginx.conf").path, "-s", "reload"])
  }

  public func stop() { child.stop() }
}
