import Foundation
import PinConfig
import PinTrust
import Synchronization

/// The pin families of `/metrics`: pin health and dynamic pin lists.
extension ProxyMetrics {
  /// Per pinned rule: whether it pins one key without a dynamic list; and,
  /// once a chain met a pin, whether a backup pin remains and seconds until
  /// the certificate carrying the matched pin expires.
  func renderPinHealth(_ rules: [(rule: String, health: PinHealth)], into out: inout String) {
    guard !rules.isEmpty else { return }
    func family(_ name: String, _ help: String, _ value: (PinHealth) -> String?) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
      for (rule, health) in rules {
        if let value = value(health) { out += "\(name){rule=\"\(ProxyMetrics.escape(rule))\"} \(value)\n" }
      }
    }
    family(
      "pinproxy_pin_single",
      "1 for a pinned rule with exactly one pin and no dynamic pin list (no backup to rotate to)."
    ) { $0.isSinglePin ? "1" : "0" }
    family(
      "pinproxy_pin_backup_available",
      "1 when the rule has something to rotate to: a dynamic list, or a configured pin the certificate matched last does not carry."
    ) { $0.configuredPins.isEmpty ? nil : ($0.hasBackup ? "1" : "0") }
    family(
      "pinproxy_pinned_certificate_expiry_seconds",
      "Seconds until the certificate carrying the pin the last accepted chain met expires (certificate mode: the last pinned certificate)."
    ) { $0.secondsToExpiry.map { String(format: "%.0f", $0) } }
  }

  /// Per rule with `dynamicPins`: entries in force, seconds to the next
  /// update, and when the last update succeeded.
  func renderPinLists(_ stores: [DynamicPinStore], now: Date, into out: inout String) {
    guard !stores.isEmpty else { return }
    let states = stores.map { ($0.spec, $0.snapshot) }
    func family(_ name: String, _ help: String, _ value: (DynamicPinStore.State) -> String?) {
      spec(name, help) { value($1) }
    }
    func spec(_ name: String, _ help: String, _ value: (DynamicPinSpec, DynamicPinStore.State) -> String?) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
      for (spec, state) in states {
        if let value = value(spec, state) {
          out += "\(name){rule=\"\(ProxyMetrics.escape(spec.ruleDomain))\"} \(value)\n"
        }
      }
    }
    spec("pinproxy_dynamic_pins_update_interval_seconds", "Each rule's configured list update interval.") {
      spec, _ in String(format: "%.0f", spec.updateInterval)
    }
    family("pinproxy_dynamic_pins_entries", "Unexpired entries of each rule's dynamic pin list.") {
      String($0.list.usable(at: now).count)
    }
    family("pinproxy_dynamic_pins_next_update_seconds", "Seconds until each rule's list is fetched again.") {
      String(format: "%.0f", max(0, $0.nextUpdate.timeIntervalSince(now)))
    }
    family(
      "pinproxy_dynamic_pins_expire_seconds",
      "Seconds until the last unexpired entry of each rule's list expires (the list is then empty)."
    ) { state in
      state.list.usable(at: now).map(\.expires).max().map {
        String(format: "%.0f", $0.timeIntervalSince(now))
      }
    }
    family(
      "pinproxy_dynamic_pins_last_update_timestamp_seconds",
      "When each rule's list was last fetched and verified (Unix time)."
    ) { state in state.lastSuccess.map { String(format: "%.0f", $0.timeIntervalSince1970) } }
  }
}
