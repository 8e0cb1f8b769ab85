/// A program of a user, as `LocalProgramActivity` counts it. Hashed once,
/// when a connection's program is first counted (`LocalPeer.activity`): counting a request then hashes
/// one word, not the program's name.
struct LocalProgramKey: Hashable, Sendable {
  let uid: UInt32?
  let program: String
  private let hash: Int

  init(uid: UInt32?, program: String) {
    self.uid = uid
    self.program = program
    var hasher = Hasher()
    hasher.combine(uid)
    hasher.combine(program)
    hash = hasher.finalize()
  }

  static func == (left: LocalProgramKey, right: LocalProgramKey) -> Bool {
    left.hash == right.hash && left.uid == right.uid && left.program == right.program
  }

  func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}
