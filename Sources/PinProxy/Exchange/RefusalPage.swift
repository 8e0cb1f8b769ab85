import Foundation
import PinConfig
import PinHTTP
import PinTrust

/// The refusal as a small self-contained HTML page, for a person looking at
/// a browser or a web view: what happened in plain words, the failure code,
/// the host and the rule, when, what an operator can run to see why, and the
/// presented chain's pins folded away. No script, no style sheet or image
/// from elsewhere; every value is escaped for HTML after `PrintableText`.
struct RefusalPage {
  let failure: ProxyFailure
  let host: String
  let rule: String
  let time: Date
  /// The id the operator finds in the log line and on the admin page.
  var incident = ""
  /// `summary` leaves out the reason, the commands and the chain: they stay
  /// on the operator's page, under the incident id.
  var detail = ListenerConfig.RefusalDetail.full

  /// Whether the request comes from a browser or a web view, which shows
  /// the body to a person: a navigation (`Sec-Fetch-Mode: navigate`), a
  /// page load (`Upgrade-Insecure-Requests: 1`, which browsers send only
  /// for documents), or HTML as the first type it accepts from a
  /// browser-like `User-Agent` (`Mozilla/`, which every browser and web
  /// view sends; web views that predate Fetch Metadata send only this).
  /// Programs get the plain-text line: an `Accept` listing `text/html` is
  /// not enough, because Java's HttpURLConnection sends `text/html, image/gif,
  /// image/jpeg, */*; q=0.2` by default (`…, *; q=.2, */*; q=.2` before JDK
  /// 17) with `User-Agent: Java/…`, and a page's `fetch()` (`Sec-Fetch-Mode:
  /// cors`) reads the body as data.
  static func wanted(by request: HTTPRequestHead?) -> Bool {
    guard let headers = request?.headers else { return false }
    if headers.tokens("Sec-Fetch-Mode").contains("navigate") { return true }
    if headers.tokens("Upgrade-Insecure-Requests").contains("1") { return true }
    let firstType = headers.tokens("Accept").first?.split(separator: ";", maxSplits: 1).first
    guard firstType?.trimmingCharacters(in: .whitespaces) == "text/html" else { return false }
    return headers.values("User-Agent").contains { $0.contains("Mozilla/") }
  }

  /// The sentence a person reads first.
  static func headline(_ code: FailureCode) -> String {
    switch code {
    case .pinMismatch, .noPins: return "This site's certificate does not match what it is pinned to"
    case .dynamicPinsUntrusted, .dynamicPinsEmpty:
      return "This site's certificate is not in its signed list of allowed certificates"
    case .untrustedChain, .selfSignedRequiresPinning:
      return "This site's certificate is not issued by an authority trusted for it"
    case .malformedCertificate: return "This site's certificate is malformed"
    case .ctRequired:
      return "This site's certificate was not shown to be publicly logged (certificate transparency)"
    case .hostnameMismatch: return "This site's certificate is for a different name"
    case .expired: return "This site's certificate has expired or is not valid yet"
    case .tlsVersion, .weakCipher, .weakKey:
      return "This site's connection security is below what is required for it"
    case .handshakeFailed: return "A secure connection to this site could not be set up"
    case .upstreamUnreachable: return "This site could not be reached"
    case .upstreamTimeout: return "This site took too long to answer"
    case .deniedByPolicy: return "This site is not allowed through this proxy"
    case .badRequest: return "The request could not be understood"
    case .overCapacity: return "The proxy is too busy to take this request now"
    case .proxyAuthRequired: return "This proxy needs your user name and password"
    case .clientNotAllowed: return "This computer may not use this proxy"
    case .revoked: return "This site's certificate has been revoked by its issuer"
    case .revocationUnknown: return "This site's certificate could not be checked for revocation"
    case .pinsNotEnforceable: return "This site is pinned, and this proxy listener cannot check its pins"
    case .parentProxyRefused: return "The network's proxy refused the connection to this site"
    case .parentProxyUnreachable: return "The network's proxy could not be reached"
    }
  }

  /// What happened to the request, in one sentence.
  var summary: String {
    switch failure.code {
    case .upstreamTimeout: return "The proxy gave up waiting for the site's answer."
    case .upstreamUnreachable: return "The proxy could not connect to the site."
    case .parentProxyRefused, .parentProxyUnreachable:
      return "The proxy goes through another proxy on this network, which did not connect it to the site."
    case .badRequest: return "The proxy could not forward this request as it was sent."
    case .overCapacity: return "The proxy has no room for this request now; try again shortly."
    case .proxyAuthRequired:
      return "The request was not sent: the proxy did not get a valid user name and password."
    default: return "The proxy refused this request to keep the connection safe; it was not sent to the site."
    }
  }

  /// The rule as a person reads it: no rule matched (a denied host, a
  /// request refused before routing) is "none", not the log's "-".
  var ruleShown: String { rule == "-" ? "none" : rule }

  /// What an operator can do, and the commands to run on the proxy's host
  /// to see the same decision. `pin` gets `--config FILE` so that it dials
  /// as the daemon does: a host mapped by `connectTo` (an origin on another
  /// address, often not resolvable at all) is reached there, and an
  /// unmapped one directly. The page cannot tell which, and the command
  /// works as printed either way.
  var operatorAdvice: (sentence: String, commands: [String]) {
    let bare = host.split(separator: ":").first.map(String.init) ?? host
    switch failure.code {
    case .deniedByPolicy:
      return (
        "Add a domain rule for \(bare) to the configuration, then check it:", ["pinproxy check --config FILE"]
      )
    case .proxyAuthRequired, .clientNotAllowed:
      return (
        "Ask the proxy's operator for access; the proxy's log line (event \"refused\") names the reason.", []
      )
    case .pinsNotEnforceable:
      return ("The proxy's log line (event \"refused\") names the listener setting to change.", [])
    case .upstreamUnreachable, .upstreamTimeout, .badRequest:
      return ("The proxy's log line for this request (event \"refused\") has the details.", [])
    case .parentProxyRefused, .parentProxyUnreachable:
      return (
        "The reason above names the parent proxy and its answer: check its address and the credentials"
          + " file, then the proxy's log line (event \"refused\").", []
      )
    default:
      return (
        "See what the site presents, then the rule's decision on it:",
        [
          "pinproxy pin --config FILE \(host)",
          "pinproxy evaluate --host \(bare) --chain CHAIN.pem --config FILE",
        ]
      )
    }
  }

  func html() -> [UInt8] {
    let when = time.formatted(.iso8601)
    var page = """
      <!doctype html>
      <html lang="en"><head><meta charset="utf-8">
      <meta name="viewport" content="width=device-width, initial-scale=1">
      <title>\(RefusalPage.escape(RefusalPage.headline(failure.code)))</title>
      <style>body{font:16px/1.5 system-ui,sans-serif;max-width:44em;margin:2em auto;padding:0 1em;color:#222}
      h1{font-size:1.4em}dt{font-weight:600}code,pre{font:13px ui-monospace,monospace;overflow-wrap:anywhere;white-space:pre-wrap}
      .code{color:#a00}</style></head>
      <body>
      <h1>\(RefusalPage.escape(RefusalPage.headline(failure.code)))</h1>
      <p>\(RefusalPage.escape(summary))</p>
      <dl>
      <dt>Failure code</dt><dd><code class="code">\(RefusalPage.escape(failure.code.rawValue))</code></dd>
      <dt>Site</dt><dd><code>\(RefusalPage.escape(host))</code></dd>
      <dt>Rule</dt><dd><code>\(RefusalPage.escape(ruleShown))</code></dd>
      <dt>When</dt><dd>\(when)</dd>
      <dt>Incident</dt><dd><code id="incident">\(RefusalPage.escape(incident))</code></dd>

      """
    guard detail == .full else {
      page += """
        </dl>
        <p>The proxy's operator can see the details of this refusal under its incident id.</p>
        </body></html>

        """
      return Array(page.utf8)
    }
    page += """
      <dt>Why</dt><dd>\(RefusalPage.escape(failure.reason))</dd>
      </dl>
      <h2>For the operator</h2>
      <p>\(RefusalPage.escape(operatorAdvice.sentence))</p>

      """
    for command in operatorAdvice.commands {
      page += "<pre><code>\(RefusalPage.escape(command))</code></pre>\n"
    }
    if let chain = failure.chain {
      page += """
        <details><summary>Certificates the site presented (pins and digests)</summary>
        <pre>\(RefusalPage.escape(chain).replacingOccurrences(of: "] [", with: "]\n["))</pre></details>

        """
    }
    page += "</body></html>\n"
    return Array(page.utf8)
  }

  /// `PrintableText` first (no control or bidi characters), then the five
  /// characters HTML gives meaning to.
  static func escape(_ text: String) -> String {
    var out = ""
    for character in PrintableText.escaped(text) {
      switch character {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&#39;"
      default: out.append(character)
      }
    }
    return out
  }
}
