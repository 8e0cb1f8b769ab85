import Foundation
import Yams

/// Reads a configuration file strictly: unknown keys, wrong types, bad values
/// and missing required keys are errors, and every one is reported with file,
/// line and key. Files named by the config are checked later, by the compiler.
public enum ConfigurationParser {
  public static func load(file: String) throws(ConfigErrors) -> Configuration {
    try parse(try read(file), file: file)
  }

  static func read(_ file: String) throws(ConfigErrors) -> String {
    func fail(_ message: String) -> ConfigErrors {
      ConfigErrors(errors: [ConfigError(file: file, line: 0, column: 0, key: "", message: message)])
    }
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
      throw fail("cannot read the configuration file: no such file")
    }
    guard !isDirectory.boolValue else { throw fail("cannot read the configuration file: it is a directory") }
    // Foundation opens without blocking and reads regular files only (a
    // FIFO is refused, not waited on); this names what stands there instead.
    var status = stat()
    if stat(file, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
      let kind = status.st_mode & S_IFMT == S_IFIFO ? "a FIFO" : "a device or socket"
      throw fail("cannot read the configuration file: it is \(kind), not a regular file")
    }
    guard let data = FileManager.default.contents(atPath: file) else {
      throw fail("cannot read the configuration file: permission denied or not a regular file")
    }
    guard let text = String(data: data, encoding: .utf8) else {
      throw fail("not UTF-8 text")
    }
    return text
  }

  /// Parses and compiles as far as possible and returns every problem found,
  /// in file order; empty when the configuration is good. `compile` is the
  /// runtime's compiler (it reads the files the configuration names); the
  /// parser itself knows nothing of it.
  public static func check(
    file: String, compile: (Configuration) throws(ConfigErrors) -> Void
  ) -> [ConfigError] {
    let text: String
    do {
      text = try read(file)
    } catch {
      return error.errors
    }
    let (configuration, errors) = parseCollecting(text, file: file)
    guard let configuration else { return errors }
    var all = errors
    do {
      try compile(configuration)
    } catch {
      all += error.errors
    }
    return ConfigErrors(errors: all.sorted { ($0.line, $0.column) < ($1.line, $1.column) }).errors
  }

  public static func parse(_ text: String, file: String) throws(ConfigErrors) -> Configuration {
    let (configuration, errors) = parseCollecting(text, file: file)
    guard let configuration, errors.isEmpty else { throw ConfigErrors(errors: errors) }
    return configuration
  }

  /// Everything that could be read, and every error. The configuration is nil
  /// only when the YAML itself does not parse; otherwise it holds the valid
  /// parts, so `check` can go on to report problems with the files it names.
  public static func parseCollecting(_ text: String, file: String) -> (Configuration?, [ConfigError]) {
    let reader = ConfigReader(file: file)
    var configuration = Configuration(file: file)
    guard text.utf8.count <= maximumFileBytes else {
      return (
        nil,
        [
          ConfigError(
            file: file, line: 0, column: 0, key: "", message: "larger than \(maximumFileBytes) bytes")
        ]
      )
    }
    let root: Node?
    do {
      root = try Yams.compose(yaml: text)
    } catch let error as YamlError {
      return (nil, [yamlSyntaxError(error, file: file)])
    } catch {
      return (nil, [ConfigError(file: file, line: 0, column: 0, key: "", message: "\(error)")])
    }
    if let root {
      // Aliases share storage, so a small file can describe a huge tree
      // ("billion laughs"); walking it key by key would take minutes.
      guard nodeCount(root, budget: maximumNodes) <= maximumNodes else {
        return (
          nil,
          [
            ConfigError(
              file: file, line: 0, column: 0, key: "",
              message: "more than \(maximumNodes) YAML nodes once aliases are expanded")
          ]
        )
      }
      parseRoot(ConfigNode(node: root, path: "", reader: reader), into: &configuration)
    }
    return (configuration, reader.reportedErrors)
  }

  /// A real configuration is a few kilobytes; these bound the work one
  /// reload can cost.
  static let maximumFileBytes = 4 << 20
  static let maximumNodes = 100_000

  /// Nodes in the tree with aliases expanded, counting stops past `budget`.
  static func nodeCount(_ node: Node, budget: Int) -> Int {
    var count = 0
    var stack = [node]
    while let next = stack.popLast() {
      count += 1
      if count > budget { return count }
      switch next {
      case .scalar, .alias: break
      case .sequence(let sequence): stack.append(contentsOf: sequence)
      case .mapping(let mapping):
        for (key, value) in mapping {
          stack.append(key)
          stack.append(value)
        }
      }
    }
    return count
  }

  static let rootKeys: Set = [
    "listeners", "admin", "stateDirectory", "connectTo", "anchorSets", "defaults", "domains", "timeouts",
    "limits",
    "eventLoops", "localCA", "logging", "certificateTransparency", "parentProxies",
  ]

  static func parseRoot(_ root: ConfigNode, into configuration: inout Configuration) {
    // A text file or a stray value is YAML too (a scalar): say what the file should be.
    guard case .mapping = root.node else {
      return root.error(
        "not a pinproxy configuration: the top level must be a mapping of keys such as listeners, defaults"
          + " and domains")
    }
    guard let mapping = root.mapping(allowed: rootKeys) else { return }
    let file = configuration.file
    if let listeners = mapping["listeners"]?.sequence {
      configuration.listeners = listeners.compactMap { parseListener($0, file: file) }
      var seen = Set<String>()
      for (node, listener) in zip(listeners, configuration.listeners)
      where !seen.insert(listener.name).inserted {
        node.error("listener name \"\(listener.name)\" is used twice")
      }
    }
    if let admin = mapping["admin"] { configuration.admin = parseAdmin(admin, file: file) }
    if let state = mapping["stateDirectory"]?.string {
      configuration.stateDirectory = ConfigValues.resolve(state, relativeTo: file)
    }
    for node in mapping["connectTo"]?.sequence ?? [] {
      guard let text = node.string else { continue }
      guard let rule = connectTo(text) else {
        node.error("\"\(text)\" is not HOST:PORT:ADDRESS:PORT")
        continue
      }
      configuration.connectTo.append(rule)
    }
    if let ca = mapping["localCA"]?.mapping(allowed: ["certificate", "key"]),
      let certificate = ca.required("certificate").flatMap({ configPath($0, file: file) }),
      let key = ca.required("key").flatMap({ configPath($0, file: file) })
    {
      configuration.localCA = LocalCAConfig(certificate: certificate, key: key)
    }
    if let logging = mapping["logging"]?.mapping(allowed: ["level", "format", "access", "queryStrings"]) {
      configuration.logging.level = logging.choice("level", default: .info)
      if logging["format"] != nil {
        configuration.logging.format = logging.choice("format", default: LoggingConfig.Format.text)
      }
      configuration.logging.access = logging["access"]?.bool ?? true
      configuration.logging.queryStrings = logging["queryStrings"]?.bool ?? false
    }
    if let timeouts = mapping["timeouts"] { configuration.timeouts = parseTimeouts(timeouts) }
    if let limits = mapping["limits"] { configuration.limits = parseLimits(limits) }
    if let loops = mapping["eventLoops"], let count = loops.int {
      if (0...256).contains(count) {
        configuration.eventLoops = count
      } else {
        loops.error("must be 0 (one per core) to 256")
      }
    }
    if let sets = mapping["anchorSets"] { configuration.anchorSets = parseAnchorSets(sets, file: file) }
    if let defaults = mapping["defaults"] { configuration.defaults = parseDefaults(defaults) }
    if let ct = mapping["certificateTransparency"] {
      configuration.certificateTransparency = parseTransparency(ct, file: file)
    }
    if let parents = mapping["parentProxies"] {
      configuration.parentProxies = parseParentProxies(parents, file: file)
    }
    var parentChoices: [(ParentChoice, ConfigNode)] = []
    if let node = mapping["defaults"]?.peek("parentProxy"), let choice = parentChoice(node) {
      parentChoices.append((choice, node))
    }
    defer { checkParentChoices(configuration, nodes: parentChoices) }
    if let domains = mapping["domains"]?.sequence {
      for node in domains {
        if let choiceNode = node.peek("parentProxy"), let choice = parentChoice(choiceNode) {
          parentChoices.append((choice, choiceNode))
        }
      }
      configuration.domains = domains.compactMap { parseDomain($0, file: file) }
      var seen: [String: Int] = [:]
      for (node, domain) in zip(domains, configuration.domains) {
        if let first = seen[domain.domain.description] {
          node.error("domain \(domain.domain) is already configured at line \(first)")
        } else {
          seen[domain.domain.description] = node.line
        }
      }
    }
  }

  /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
  static func isLineBreakOrControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar == "\u{2028}"
      || scalar == "\u{2029}"
  }

  static let listenerKeys: Set = [
    "name", "address", "mode", "intercept", "passthrough", "downstream", "upstream", "downstreamTLS",
    "allowedConnectPorts", "allowedClients", "allowedUsers", "proxyAuth", "downstreamClientCA",
    "allowedClientNames", "refusalDetail", "pac",
  ]

  static func parseListener(_ node: ConfigNode, file: String) -> ListenerConfig? {
    guard let mapping = node.mapping(allowed: listenerKeys) else { return nil }
    let name = mapping.required("name")?.string
    let address = mapping.required("address").flatMap(parseAddress)
    let mode: ListenerConfig.Mode = mapping.choice("mode", default: .forward)
    guard let name, let address else { return nil }
    // A name reaches log lines, metric labels, the ready file and the PAC
    // file: one line of printable text, so it can never start another.
    if name.isEmpty || name.unicodeScalars.contains(where: ConfigurationParser.isLineBreakOrControl) {
      mapping["name"]?.error("a listener name is one non-empty line without control characters")
    }
    var listener = ListenerConfig(name: name, address: address, mode: mode)
    listener.intercept = mapping["intercept"]?.bool ?? true
    listener.downstreamTLS = mapping["downstreamTLS"]?.bool ?? false
    if let node = mapping["pac"] {
      listener.pac = node.bool ?? true
      if mode != .forward && listener.pac { node.error("a PAC file is served by forward listeners only") }
    }
    if mode != .forward { listener.pac = false }
    if mapping["refusalDetail"] != nil {
      listener.refusalDetail = mapping.choice("refusalDetail", default: ListenerConfig.RefusalDetail.summary)
    }
    if let ports = mapping["allowedConnectPorts"]?.sequence {
      listener.allowedConnectPorts = ports.compactMap { node in
        guard let port = node.int else { return nil }
        guard (1...65535).contains(port) else {
          node.error("a port is 1 to 65535")
          return nil
        }
        return port
      }
    }
    // An entry is a host or *.domain, or {host: …, allowsMissingSNI: true}
    // for a client whose tunnel may open without naming its host in SNI.
    for node in mapping["passthrough"]?.sequence ?? [] {
      var host: String?
      var allowsMissingSNI = false
      if case .mapping = node.node {
        guard let entry = node.mapping(allowed: ["host", "allowsMissingSNI"]) else { continue }
        host = entry.required("host")?.string
        allowsMissingSNI = entry["allowsMissingSNI"]?.bool ?? false
      } else {
        host = node.string
      }
      guard let host else { continue }
      if PassthroughList.pattern(host) == nil { node.error("\"\(host)\" is not a host or *.domain") }
      listener.passthrough.append(host)
      if allowsMissingSNI { listener.passthroughWithoutSNI.append(host) }
      listener.passthroughLocations.append(location(node))
    }
    if let downstream = mapping["downstream"]?.mapping(allowed: ["minimumTLSVersion", "ciphers", "http2"]) {
      listener.downstream.minimumTLSVersion = downstream.choice("minimumTLSVersion", default: .tls12)
      listener.downstream.ciphers = downstream["ciphers"]?.string ?? ""
      listener.downstream.http2 = downstream["http2"]?.bool ?? true
    }
    if let upstream = mapping["upstream"] {
      listener.upstream = parseAddress(upstream)
      if mode != .tunnel { upstream.error("only tunnel listeners have a fixed upstream") }
    } else if mode == .tunnel {
      _ = mapping.required("upstream")
    }
    if let node = mapping["allowedClients"] {
      listener.allowedClientsLocation = Location(line: node.line, column: node.column, key: node.path)
    }
    parseListenerAccess(mapping, into: &listener, file: file)
    return listener
  }

  /// `HOST:PORT:ADDRESS:PORT` (curl's `--connect-to`, without its empty
  /// wildcards): the one syntax of `connectTo` entries and of `pinproxy pin
  /// --connect-to`.
  public static func connectTo(_ text: String) -> ConnectToRule? {
    let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count == 3, let from = ConfigValues.hostPort(parts[0] + ":" + parts[1]),
      let to = ConfigValues.hostPort(String(parts[2]))
    else { return nil }
    return ConnectToRule(from: from, to: to)
  }

  static func parseAddress(_ node: ConfigNode) -> HostPort? {
    guard let text = node.string else { return nil }
    guard let address = ConfigValues.hostPort(text) else {
      node.error("\"\(text)\" is not HOST:PORT with a port from 1 to 65535")
      return nil
    }
    return address
  }

  /// The parser's own words at its position, and where the construct it was
  /// reading began (an unclosed `[` is reported where the file ends).
  static func yamlSyntaxError(_ error: YamlError, file: String) -> ConfigError {
    func located(_ kind: String, _ context: YamlError.Context?, _ problem: String, _ mark: Mark)
      -> ConfigError
    {
      let started = context.map { " (\($0.text) at line \($0.mark.line), column \($0.mark.column))" } ?? ""
      return ConfigError(
        file: file, line: mark.line, column: mark.column, key: "", message: "\(kind): \(problem)\(started)")
    }
    switch error {
    case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _):
      return located("YAML syntax error", context, problem, mark)
    case .composer(let context, let problem, let mark, _):
      return located("YAML error", context, problem, mark)
    case .reader(let problem, _, _, _):
      return ConfigError(file: file, line: 0, column: 0, key: "", message: "not readable as YAML: \(problem)")
    default:
      return ConfigError(file: file, line: 0, column: 0, key: "", message: "not readable as YAML: \(error)")
    }
  }
}
