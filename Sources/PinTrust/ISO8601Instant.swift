import Foundation

/// An ISO 8601 instant as people and published lists write it, with or
/// without fractional seconds (`2026-06-01T00:00:00Z`, `…00.123Z`).
public enum ISO8601Instant {
  public static func parse(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)
  }
}
