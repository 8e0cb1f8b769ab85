/// "Did you mean …?" for an unknown configuration key: the valid key
/// closest to it by edit distance, when it is close enough to be a typo
/// (`pinningMod`, `PinningMode`, `pinning_mode`, `validateDomainName`)
/// rather than another word (`colour`).
enum KeySuggestion {
  static func closest(to key: String, among allowed: Set<String>) -> String? {
    let typed = Array(key.lowercased())
    var best: (distance: Int, key: String)?
    for candidate in allowed.sorted() {
      let distance = editDistance(typed, Array(candidate.lowercased()))
      if distance < (best?.distance ?? Int.max) { best = (distance, candidate) }
    }
    // At most two edits, and at most one per three characters typed: "mod"
    // may mean "mode", "name" does not mean "mode".
    guard let best, best.distance <= 2, best.distance * 3 <= typed.count else { return nil }
    return best.key
  }

  /// Levenshtein distance with adjacent transpositions counted as one edit
  /// (optimal string alignment).
  static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    var previous2 = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
      current[0] = i
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
          current[j] = min(current[j], previous2[j - 2] + 1)
        }
      }
      (previous2, previous, current) = (previous, current, previous2)
    }
    return previous[b.count]
  }
}
