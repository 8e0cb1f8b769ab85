/// What an importer made of an app's configuration: pinproxy rules with the
/// source key behind each setting, anchor set stubs, and everything that
/// could not be carried over. Nothing is dropped silently: each loss is a
/// `dropped` line, each change of meaning an `approximated` line.
public struct ImportedConfig: Sendable {
  /// One setting of a rule and the app key it came from.
  public struct Setting: Sendable, Equatable {
    public var key: String
    /// Already YAML: a quoted string, a bool, or a flow list of quoted strings.
    public var value: String
    public var source: String
  }

  public struct Rule: Sendable, Equatable {
    /// Validated (`TrustHost`), lowercased.
    public var domain: String
    /// Where the rule came from, e.g. `NSExceptionDomains["example.com"]`.
    public var sources: [String]
    public var settings: [Setting] = []

    public init(domain: String, source: String) {
      self.domain = domain
      sources = [source]
    }

    public func value(_ key: String) -> String? { settings.first { $0.key == key }?.value }

    /// Sets `key`, replacing an earlier value of it.
    public mutating func set(_ key: String, _ value: String, from source: String) {
      settings.removeAll { $0.key == key }
      settings.append(Setting(key: key, value: value, source: source))
    }
  }

  /// An anchor set whose file is the app's own (Android `@raw/NAME`).
  public struct AnchorSet: Sendable, Equatable {
    public var name: String
    public var file: String
    public var source: String
  }

  public var format: String
  public var input: String
  public var rules: [Rule] = []
  public var anchorSets: [AnchorSet] = []
  /// `defaults:` settings (key, YAML value, source).
  public var defaults: [Setting] = []
  /// The CT log list file for `certificateTransparency`, when a rule needs one.
  public var transparencyLogList: String?
  /// App settings pinproxy cannot express: the proxy will decide differently.
  public var dropped: [String] = []
  /// Settings carried over with a different reach, said explicitly.
  public var approximated: [String] = []
  /// Keys with no meaning in front of the app (app-side switches), listed for completeness.
  public var ignored: [String] = []

  public init(format: String, input: String) {
    self.format = format
    self.input = input
  }

  /// The rule for `domain`, created on first use (one rule per domain:
  /// pinproxy refuses a second).
  public mutating func withRule(_ domain: String, source: String, _ change: (inout Rule) -> Void) {
    if let index = rules.firstIndex(where: { $0.domain == domain }) {
      if !rules[index].sources.contains(source) { rules[index].sources.append(source) }
      change(&rules[index])
    } else {
      var rule = Rule(domain: domain, source: source)
      change(&rule)
      rules.append(rule)
    }
  }
}
