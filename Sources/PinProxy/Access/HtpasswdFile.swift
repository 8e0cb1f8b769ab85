import PinHTTP
import PinTLS

/// An htpasswd file (`user:hash` per line, as Apache's `htpasswd -B`
/// writes it), read whole at load and on every reload. Every entry is
/// checked at load: a weak or plain-text entry makes the file, and so the
/// configuration, an error naming the line, so a bad file never replaces
/// the one in force.
struct HtpasswdFile: Sendable {
  /// User name → hash.
  let entries: [String: PasswordHash]
  /// What an unknown user's password is hashed against, so that the time
  /// taken does not tell which users exist: the entry of highest bcrypt cost
  /// (`htpasswd -B -C`), else any.
  let decoy: PasswordHash?

  /// The decoy's bcrypt cost (0 for other methods).
  var decoyCost: Int { decoy?.bcryptCost ?? 0 }

  /// The distinct bcrypt costs of the file, when there is more than one: a
  /// failed check then waits for the costliest, so the cheaper entries buy
  /// no speed and only weaken those users' hashes.
  var mixedCosts: [Int]? {
    let costs = Set(entries.values.map(\.bcryptCost))
    return costs.count > 1 ? costs.sorted() : nil
  }

  /// A real file holds a few users; these bound what a reload may cost.
  static let maximumBytes = 1 << 20
  static let maximumEntries = 10_000

  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  init(path: String) throws(Failure) {
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: HtpasswdFile.maximumBytes)
    } catch {
      throw Failure(description: "htpasswd file \(path): \(error.description)")
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
      throw Failure(description: "htpasswd file \(path) is not UTF-8 text")
    }
    try self.init(text: text, name: path)
  }

  init(text: String, name: String) throws(Failure) {
    var entries: [String: PasswordHash] = [:]
    var problems: [String] = []
    // "\r\n" is one Character in Swift: split on any line end, so a file
    // written on Windows reads the same.
    for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
      .enumerated()
    {
      if line.isEmpty || line.hasPrefix("#") { continue }
      let place = "\(name) line \(index + 1)"
      guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
        problems.append("\(place): not user:hash")
        continue
      }
      let user = String(line[..<colon])
      let hash = String(line[line.index(after: colon)...])
      guard entries[user] == nil else {
        problems.append("\(place): user \(HtpasswdFile.quoted(user)) appears twice")
        continue
      }
      do {
        entries[user] = try PasswordHash(checking: hash)
      } catch {
        problems.append("\(place): user \(HtpasswdFile.quoted(user)): \(error.description)")
      }
      if entries.count > HtpasswdFile.maximumEntries {
        throw Failure(description: "\(name) has more than \(HtpasswdFile.maximumEntries) users")
      }
    }
    guard problems.isEmpty else { throw Failure(description: problems.prefix(5).joined(separator: "; ")) }
    guard !entries.isEmpty else { throw Failure(description: "\(name) names no user") }
    self.entries = entries
    decoy = entries.values.max { $0.bcryptCost < $1.bcryptCost }
  }

  /// A user name as the operator wrote it, never with raw control characters.
  static func quoted(_ user: String) -> String { "\"" + PrintableText.escaped(user) + "\"" }
}
