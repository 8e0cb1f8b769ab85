import Foundation

/// A live `/metrics` read by Prometheus' own Python parser (prometheus_client).
public enum PrometheusScrape {
  /// Every sample as `name{k=v,…} value`, labels sorted by name.
  public static func samples(adminPort: Int) throws -> [String] {
    let script = """
      import sys, urllib.request
      from prometheus_client.parser import text_string_to_metric_families
      text = urllib.request.urlopen("http://127.0.0.1:\(adminPort)/metrics").read().decode()
      for family in text_string_to_metric_families(text):
          for sample in family.samples:
              labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
              print(f"{sample.name}{{{labels}}} {sample.value}")
      """
    let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script])
    guard result.status == 0 else {
      throw HarnessError("prometheus_client could not parse /metrics: \(result.stderr)")
    }
    return result.stdout.split(separator: "\n").map(String.init)
  }
}

/// A ClientHello no TLS library would send: Python builds one for
/// `evil.example` inside a CONNECT to httpbin.org:443, and the server name's
/// 12 bytes are replaced before it is sent (same length, so every length
/// field stays valid). Reads until the proxy closes.
public enum HandEditedClientHello {
  /// - Parameter serverName: a Python bytes literal's body of exactly 12 bytes.
  public static func send(to port: Int, serverName: String) throws {
    let script = """
      import socket, ssl
      s = socket.create_connection(("127.0.0.1", \(port)))
      s.sendall(b"CONNECT httpbin.org:443 HTTP/1.1\\r\\nHost: httpbin.org:443\\r\\n\\r\\n")
      assert s.recv(1024).startswith(b"HTTP/1.1 200")
      ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
      ctx.check_hostname = False
      ctx.verify_mode = ssl.CERT_NONE
      inbound, outbound = ssl.MemoryBIO(), ssl.MemoryBIO()
      obj = ctx.wrap_bio(inbound, outbound, server_side=False, server_hostname="evil.example")
      try:
          obj.do_handshake()
      except ssl.SSLWantReadError:
          pass
      hello = bytearray(outbound.read())
      name, replacement = b"evil.example", b"\(serverName)"
      assert len(replacement) == len(name)
      at = hello.find(name)
      hello[at:at + len(name)] = replacement
      s.sendall(bytes(hello))
      s.settimeout(5)
      try:
          while s.recv(4096):
              pass
      except Exception:
          pass
      """
    let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script])
    guard result.status == 0 else {
      throw HarnessError("the hand-edited ClientHello was not sent: \(result.stderr)")
    }
  }
}
