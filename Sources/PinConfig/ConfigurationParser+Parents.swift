extension ConfigurationParser {
  /// `parentProxies: {NAME: {url, credentialsFile}}`. The URL is
  /// `http://host:port` or `socks5://host:port`, nothing more: credentials
  /// in a URL end up in logs, shell histories and process lists, so they
  /// are refused there and read from `credentialsFile` instead.
  static func parseParentProxies(_ node: ConfigNode, file: String) -> [ParentProxyConfig] {
    var parents: [ParentProxyConfig] = []
    guard let entries = node.namedEntries else {
      node.error("a mapping of parent proxy names to {url, credentialsFile}")
      return []
    }
    for (name, entry) in entries {
      if name == "direct" {
        entry.error("\"direct\" means no parent proxy and cannot name one")
        continue
      }
      guard let mapping = entry.mapping(allowed: ["url", "credentialsFile"]),
        let urlNode = mapping.required("url"), let url = urlNode.string
      else { continue }
      guard let (kind, host, port) = parentURL(url, node: urlNode) else { continue }
      parents.append(
        ParentProxyConfig(
          name: name, kind: kind, host: host, port: port,
          credentialsFile: mapping["credentialsFile"].flatMap { configPath($0, file: file) },
          location: location(entry)))
    }
    return parents
  }

  private static func parentURL(_ text: String, node: ConfigNode) -> (ParentProxyConfig.Kind, String, Int)? {
    guard let separator = text.range(of: "://") else {
      node.error("\"\(text)\" is not a URL: write http://HOST:PORT or socks5://HOST:PORT")
      return nil
    }
    let scheme = text[..<separator.lowerBound].lowercased()
    guard let kind = ParentProxyConfig.Kind(rawValue: scheme) else {
      node.error("parent proxy scheme \"\(scheme)\" is not one of http, socks5")
      return nil
    }
    var authority = text[separator.upperBound...]
    if authority.hasSuffix("/") { authority = authority.dropLast() }
    guard !authority.contains("@") else {
      node.error(
        "credentials do not belong in the URL (it is logged and shown): put user:password in credentialsFile")
      return nil
    }
    guard !authority.contains("/"), !authority.contains("?"), !authority.contains("#") else {
      node.error("a parent proxy URL is scheme://HOST:PORT, with no path")
      return nil
    }
    var host: Substring
    var portText: Substring
    if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
      host = authority[authority.index(after: authority.startIndex)..<close]
      let rest = authority[authority.index(after: close)...]
      guard rest.hasPrefix(":") else {
        node.error("a parent proxy URL needs its port: scheme://HOST:PORT")
        return nil
      }
      portText = rest.dropFirst()
    } else if let colon = authority.lastIndex(of: ":"), !authority[..<colon].contains(":") {
      host = authority[..<colon]
      portText = authority[authority.index(after: colon)...]
    } else {
      node.error("a parent proxy URL needs its port: scheme://HOST:PORT")
      return nil
    }
    guard !host.isEmpty,
      host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._:".contains($0)) })
    else {
      node.error("\"\(String(host))\" is not a host name or IP address")
      return nil
    }
    guard portText.count <= 5, portText.allSatisfy(\.isASCII), let port = Int(portText),
      (1...65535).contains(port)
    else {
      node.error("the port must be 1 to 65535")
      return nil
    }
    return (kind, String(host), port)
  }

  /// `parentProxy: NAME` or `direct`; whether NAME exists is checked once
  /// every section is read (`checkParentChoices`).
  static func parentChoice(_ node: ConfigNode) -> ParentChoice? {
    guard let text = node.string else { return nil }
    return text == "direct" ? .direct : .parent(text)
  }

  /// Every `parentProxy` names a parent of `parentProxies` (or `direct`).
  static func checkParentChoices(_ configuration: Configuration, nodes: [(ParentChoice, ConfigNode)]) {
    let names = Set(configuration.parentProxies.map(\.name))
    for (choice, node) in nodes {
      guard case .parent(let name) = choice, !names.contains(name) else { continue }
      let known =
        names.isEmpty
        ? "none is defined under parentProxies" : "defined: \(names.sorted().joined(separator: ", "))"
      node.error("no parent proxy is named \"\(name)\" (\(known)); direct means none")
    }
  }
}
