/// The runtime sections: `timeouts` and `limits`.
extension ConfigurationParser {
  static func parseTimeouts(_ node: ConfigNode) -> TimeoutsConfig {
    var timeouts = TimeoutsConfig()
    let fields: [(String, WritableKeyPath<TimeoutsConfig, Double>)] = [
      ("clientHeader", \.clientHeader), ("idleKeepAlive", \.idleKeepAlive),
      ("upstreamConnect", \.upstreamConnect),
      ("tlsHandshake", \.tlsHandshake), ("upstreamResponse", \.upstreamResponse),
      ("upstreamIdle", \.upstreamIdle),
      ("tunnelIdle", \.tunnelIdle), ("drain", \.drain), ("lingeringClose", \.lingeringClose),
    ]
    guard let mapping = node.mapping(allowed: Set(fields.map(\.0))) else { return timeouts }
    for (key, path) in fields {
      guard let value = mapping[key], let text = value.string else { continue }
      guard let seconds = ConfigValues.duration(text) else {
        value.error("\"\(text)\" is not a duration above 0 and up to 7d, such as 30s, 5m, 12h or 7d")
        continue
      }
      timeouts[keyPath: path] = seconds
    }
    return timeouts
  }

  static func parseLimits(_ node: ConfigNode) -> LimitsConfig {
    var limits = LimitsConfig()
    let fields: [(String, WritableKeyPath<LimitsConfig, Int>, ClosedRange<Int>)] = [
      ("maxConnections", \.maxConnections, 1...1_000_000),
      ("maxConnectionsPerClient", \.maxConnectionsPerClient, 1...1_000_000),
      ("maxHeaderBytes", \.maxHeaderBytes, 1024...1 << 20),
      ("maxHeaderCount", \.maxHeaderCount, 8...10_000), ("maxURILength", \.maxURILength, 64...1 << 20),
      ("maxIdlePerUpstream", \.maxIdlePerUpstream, 0...10_000),
      ("lingeringCloseBytes", \.lingeringCloseBytes, 0...1 << 34),
    ]
    guard let mapping = node.mapping(allowed: Set(fields.map(\.0))) else { return limits }
    for (key, path, range) in fields {
      guard let value = mapping[key], let number = value.int else { continue }
      guard range.contains(number) else {
        value.error("must be between \(range.lowerBound) and \(range.upperBound)")
        continue
      }
      limits[keyPath: path] = number
    }
    return limits
  }
}
