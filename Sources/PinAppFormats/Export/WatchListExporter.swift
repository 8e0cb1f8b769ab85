import PinTrust

/// `pinproxy export certspotter`: Cert Spotter's watch list, one name a
/// line, `.name` for a domain and its subdomains: the pinned rules' names,
/// whose new certificates `pinproxy ct-hook` then judges against the pins.
public enum WatchListExporter {
  public static func export(_ rules: [ExportRule]) -> AppExport {
    var result = AppExport()
    for rule in rules where rule.pins || rule.hasDynamicPins {
      if IPAddress(rule.domain) != nil {
        result.dropped.append("\(rule.domain): an IP address; Cert Spotter watches DNS names")
        continue
      }
      result.text += (rule.includesSubdomains ? "." : "") + rule.domain + "\n"
    }
    return result
  }
}
