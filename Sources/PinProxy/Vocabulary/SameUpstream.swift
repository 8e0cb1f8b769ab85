/// How the machines tell upstream handles apart (the sessions' are links
/// compared by identity; tests use plain objects).
protocol SameUpstream {
  func isSame(as other: Self) -> Bool
}
