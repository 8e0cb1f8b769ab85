import Foundation
import PinTestSupport
import XCTest

/// The design documents name code in backticks: every type, member, file
/// and folder they name must exist, so that a rename cannot leave them
/// stale silently. Names from other projects (Apple's APIs, AFNetworking,
/// OpenSSL, HTTP fields) are listed in `outsideNames`.
final class DocumentNamesTests: XCTestCase {
  let documents = [
    "docs/ARCHITECTURE.md", "docs/CONTRACTS.md", "docs/TRUST.md", "docs/SECURITY.md", "Tests/README.md",
  ]

  /// Backticked names that are not ours, each with where it comes from.
  let outsideNames: [String: String] = [
    "AFSecurityPolicy": "AFNetworking", "TSKConfiguration": "TrustKit",
    "NSAppTransportSecurity": "Apple ATS", "NSPinnedCAIdentities": "Apple ATS",
    "NSPinnedLeafIdentities": "Apple ATS", "NSRequiresCertificateTransparency": "Apple ATS",
    "NSPinnedDomains": "Apple ATS", "NSExceptionDomains": "Apple ATS", "TSKPinnedDomains": "TrustKit",
    "CertificatePinner": "OkHttp", "FindProxyForURL": "PAC", "ETag": "HTTP field",
    "SecTrustSetAnchorCertificates": "Apple Security", "DispatchQueue": "Dispatch",
    "DispatchSourceRead": "Dispatch", "Authenticator": "Java", "NotCA": "OpenSSL",
    "SignedCertificateTimestampList": "RFC 6962", "ExecStartPre": "systemd", "Linux": "the platform",
    "Accept": "HTTP field", "Host": "HTTP field", "Trailer": "HTTP field", "Upgrade": "HTTP field",
    "Via": "HTTP field", "Mozilla": "a User-Agent",
  ]

  func testEveryTypeMemberFileAndFolderTheDocumentsNameExists() throws {
    let root = Fixtures.repositoryRoot
    let code = try RepositoryCode(root: root)
    XCTAssertTrue(code.types.contains("ExchangeMachine"), "the scan of the sources found too little")
    var checked = 0
    for document in documents {
      let text = try String(contentsOfFile: root + "/" + document, encoding: .utf8)
      for name in backticked(text) {
        guard let problem = code.problem(with: name, outside: outsideNames) else {
          checked += 1
          continue
        }
        if problem != .notCode { XCTFail("\(document): `\(name)`: \(problem)") } else { continue }
      }
    }
    XCTAssertGreaterThan(checked, 300, "too few names were recognised as code")
  }

  /// The scanner itself: a stale type, member, file or folder is caught.
  func testStaleNamesAreCaught() throws {
    let code = try RepositoryCode(root: Fixtures.repositoryRoot)
    XCTAssertEqual(code.problem(with: "UpstreamProtocol", outside: [:]), .noSuchType)
    XCTAssertEqual(code.problem(with: "UpstreamTrust.refusal(of:)", outside: [:]), .noSuchMember("refusal"))
    XCTAssertNil(code.problem(with: "UpstreamTrust.verdict(of:)", outside: [:]))
    // The labels count: a renamed argument leaves a stale name.
    XCTAssertEqual(
      code.problem(with: "UpstreamTrust.verdict(for:)", outside: [:]),
      .noSuchLabels("UpstreamTrust.verdict(for:)"))
    XCTAssertNil(code.problem(with: "ForwardSession.channel(_:didReadBuffer:)", outside: [:]))
    XCTAssertNil(code.problem(with: "ForwardRouter.route(_:inside: tunnel)", outside: [:]))
    XCTAssertEqual(
      RepositoryCode.labelSignatures(
        "func f(\n  _ a: [String: Int], from b: (Int, Int) -> Void,\n  c: Int = 3\n) {", keyword: "func"
      ).sorted(), ["_:from:", "_:from:c:"])
    XCTAssertEqual(code.problem(with: "Forward/NoSuchFile.swift", outside: [:]), .noSuchFile)
    XCTAssertNil(code.problem(with: "Routing/ExchangeHost.swift", outside: [:]))
    XCTAssertEqual(code.problem(with: "Gone/", outside: [:]), .noSuchFolder)
    XCTAssertEqual(code.problem(with: "Server/RefusalPage.swift", outside: [:]), .noSuchFile)
    XCTAssertNil(code.problem(with: "Exchange/RefusalPage.swift", outside: [:]))
    XCTAssertEqual(code.problem(with: "X509_verify_cert", outside: [:]), .notCode)
    XCTAssertNil(code.problem(with: "Access/", outside: [:]))
    XCTAssertEqual(code.problem(with: "listeners[].address", outside: [:]), .notCode)
  }

  func backticked(_ text: String) -> [String] {
    var names: [String] = []
    var current: String?
    for character in text {
      if character == "`" {
        if let name = current { names.append(name) }
        current = current == nil ? "" : nil
      } else if character == "\n" {
        current = nil
      } else if current != nil {
        current!.append(character)
      }
    }
    return names
  }
}

/// What the repository's Swift declares, and which files and folders it has.
struct RepositoryCode {
  enum Problem: Equatable, CustomStringConvertible {
    case notCode
    case noSuchType
    case noSuchMember(String)
    /// The member exists, but no declaration of it has these argument labels.
    case noSuchLabels(String)
    case noSuchFile
    case noSuchFolder

    var description: String {
      switch self {
      case .notCode: "not a code name"
      case .noSuchType: "no such type, target or module is declared"
      case .noSuchMember(let member): "no declaration of `\(member)`"
      case .noSuchLabels(let name): "no declaration of `\(name)` has these argument labels"
      case .noSuchFile: "no such file"
      case .noSuchFolder: "no such folder under Sources/"
      }
    }
  }

  var types: Set<String> = []
  /// The files that declare or extend each type.
  var declaringFiles: [String: Set<String>] = [:]
  /// The members each file declares.
  var fileMembers: [String: Set<String>] = [:]
  /// Each file's functions, initialisers and cases with arguments: their
  /// argument labels as Swift writes a full name (`_:didReadBuffer:`), once
  /// with every parameter and once without those that have a default.
  var fileLabels: [String: [String: Set<String>]] = [:]
  var files: Set<String> = []
  var paths: Set<String> = []
  var folders: Set<String> = []

  init(root: String) throws {
    let manager = FileManager.default
    guard let walker = manager.enumerator(atPath: root) else { return }
    while let relative = walker.nextObject() as? String {
      let name = (relative as NSString).lastPathComponent
      let path = "\(root)/\(relative)"
      var isFolder: ObjCBool = false
      manager.fileExists(atPath: path, isDirectory: &isFolder)
      if isFolder.boolValue {
        // Build products and version control are not the repository's text.
        if name.hasPrefix(".") { walker.skipDescendants() } else { folders.insert(name) }
        // A target or a fuzz target is named by its folder.
        let parts = relative.split(separator: "/")
        if parts.count == 2, ["Sources", "Tests"].contains(parts[0]) { types.insert(name) }
        if parts.count == 3, parts[0] == "Fuzz" || parts[0] == "Benchmarks" { types.insert(name) }
        continue
      }
      files.insert(name)
      paths.insert(relative)
      if name.hasSuffix(".swift") { scan(try String(contentsOfFile: path, encoding: .utf8), file: relative) }
      // Alert names of the monitoring rules are named as code too.
      if relative.hasPrefix("config/monitoring/") {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.contains("alert:") {
          types.insert(line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces))
        }
      }
    }
  }

  /// Declarations line by line, as swift-format lays them out: a type at
  /// any depth, its members two spaces in (four in a nested type); a local
  /// variable is deeper, and a comment is not a declaration.
  private mutating func scan(_ source: String, file: String) {
    let modifiers: Set<Substring> = [
      "public", "private", "fileprivate", "internal", "static", "lazy", "final", "override", "mutating",
      "nonisolated", "indirect", "private(set)", "weak", "unowned", "open", "package",
    ]
    let typeKeywords: Set<Substring> = [
      "class", "struct", "enum", "protocol", "actor", "typealias", "extension",
    ]
    var members: Set<String> = ["init"]
    var labels: [String: Set<String>] = [:]
    var inNestedType = false
    let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
    for (index, line) in lines.enumerated() {
      let indent = line.prefix { $0 == " " }.count
      var words = line.split(separator: " ")
      while let first = words.first, modifiers.contains(first) || first.hasPrefix("@") { words.removeFirst() }
      guard let keyword = words.first, words.count > 1 else { continue }
      let name = String(words[1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
      if typeKeywords.contains(keyword) {
        types.insert(name)
        declaringFiles[name, default: []].insert(file)
        if indent == 2 { inNestedType = true }
        continue
      }
      if indent == 2 { inNestedType = false }
      let typeLevel = indent == 2 || (indent == 4 && inNestedType)
      let declares =
        ["func", "case", "init", "subscript"].contains(keyword) && indent <= 4
        || (typeLevel && (keyword == "var" || keyword == "let"))
      guard declares else { continue }
      for part in words.dropFirst().joined(separator: " ").split(separator: ",") {
        members.insert(
          String(part.trimmingCharacters(in: .whitespaces).prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        )
        if keyword != "case" { break }
      }
      guard ["func", "init", "case", "subscript"].contains(keyword) else { continue }
      let member = keyword == "init" || keyword == "subscript" ? String(keyword) : name
      for signature in Self.labelSignatures(
        lines[index...].prefix(12).joined(separator: "\n"), keyword: keyword)
      {
        labels[member, default: []].insert(signature)
      }
    }
    fileMembers[file, default: []].formUnion(members)
    fileLabels[file, default: [:]].merge(labels) { $0.union($1) }
  }

  /// The argument labels of the declaration that starts `text` (its
  /// parameter list may run over several lines): every parameter's label,
  /// and the same without defaulted ones. Empty for a case without values.
  static func labelSignatures(_ text: String, keyword: Substring) -> [String] {
    guard let open = text.firstIndex(of: "(") else { return [] }
    // A case list (`case a, b`) or a property: no parameter list of its own.
    if keyword == "case", text[..<open].contains(",") || text[..<open].contains("\n") { return [] }
    var depth = 0
    var parameters: [String] = []
    var current = ""
    for character in text[open...] {
      switch character {
      case "(", "[", "<":
        depth += 1
        if depth > 1 { current.append(character) }
      case ")", "]", ">":
        if character == ">" && current.hasSuffix("-") {
          current.append(character)
          continue
        }
        depth -= 1
        if depth == 0 {
          parameters.append(current)
          return signatures(parameters, keyword: keyword)
        }
        current.append(character)
      case "," where depth == 1:
        parameters.append(current)
        current = ""
      default:
        current.append(character)
      }
    }
    return []
  }

  private static func signatures(_ parameters: [String], keyword: Substring) -> [String] {
    var all = ""
    var required = ""
    for parameter in parameters {
      let text = parameter.trimmingCharacters(in: .whitespacesAndNewlines)
      if text.isEmpty { continue }
      // A case's unlabeled value, or `label name: Type` / `name: Type`.
      let colon = Self.topLevelColon(text)
      let label =
        colon.map { text[..<$0].split(separator: " ").first.map(String.init) ?? "_" } ?? "_"
      all += label + ":"
      if !Self.hasTopLevelDefault(text) { required += label + ":" }
    }
    return Array(Set([all, required]))
  }

  private static func topLevelColon(_ text: String) -> String.Index? {
    var depth = 0
    for index in text.indices {
      switch text[index] {
      case "(", "[", "<": depth += 1
      case ")", "]", ">": depth -= 1
      case ":" where depth == 0: return index
      default: continue
      }
    }
    return nil
  }

  private static func hasTopLevelDefault(_ text: String) -> Bool {
    var depth = 0
    for character in text {
      switch character {
      case "(", "[", "<": depth += 1
      case ")", "]", ">": depth -= 1
      case "=" where depth == 0: return true
      default: continue
      }
    }
    return false
  }

  /// The labels a document writes in `member(…)`: a full name
  /// (`(_:didReadBuffer:)`) or a call (`(_:inside: tunnel)`, `(a: x, b: y)`).
  static func documentedLabels(_ text: Substring) -> String {
    let inner = text.dropFirst().dropLast()
    if inner.isEmpty { return "" }
    // A call without labels (`take(key)`): one unlabeled argument per value.
    if !inner.contains(":") { return String(repeating: "_:", count: inner.split(separator: ",").count) }
    if inner.contains(",") {
      return inner.split(separator: ",").map { argument in
        let words = argument.split(separator: ":", maxSplits: 1)
        return (words.count == 2 ? words[0].trimmingCharacters(in: .whitespaces) : "_") + ":"
      }.joined()
    }
    return inner.split(separator: ":", omittingEmptySubsequences: false).dropLast().map {
      $0.trimmingCharacters(in: .whitespaces) + ":"
    }.joined()
  }

  /// Nil when `name` is code that exists (or not code at all: `.notCode`).
  func problem(with name: String, outside: [String: String]) -> Problem? {
    if name.hasSuffix(".swift") || name.hasSuffix(".py") || name.hasSuffix(".sh") {
      if name.contains("/") {
        let found = paths.contains(name) || paths.contains { $0.hasSuffix("/" + name) }
        return found ? nil : .noSuchFile
      }
      return files.contains(name) ? nil : .noSuchFile
    }
    if name.hasSuffix("/"), let first = name.first, first.isUppercase, !name.dropLast().contains("/"),
      name.dropLast().allSatisfy({ $0.isLetter || $0.isNumber })
    {
      if outside[String(name.dropLast())] != nil { return nil }
      return folders.contains(String(name.dropLast())) ? nil : .noSuchFolder
    }
    // OpenSSL's and nghttp2's C functions and macros (`X509_verify_cert`).
    if name.contains("_"), name.prefix(while: { $0 != "_" }).allSatisfy({ $0.isUppercase || $0.isNumber }) {
      return .notCode
    }
    // `Type`, `Type.member`, `Type.member(label:)`, `Type.Nested.member`.
    let head = name.prefix { $0 != "(" }
    guard name.last == ")" || !name.contains("("), let first = head.first, first.isUppercase,
      head.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "_" }),
      head.contains(where: { $0.isLowercase })
    else { return .notCode }
    let parts = head.split(separator: ".").map(String.init)
    let type = parts[0]
    if outside[type] != nil { return nil }
    guard type.contains(where: { $0.isLowercase }) else { return .notCode }
    guard types.contains(type) else { return .noSuchType }
    // The first member is looked for where its type is declared or
    // extended; a nested type's members anywhere.
    if parts.count > 1, !types.contains(parts[1]) {
      let declared = (declaringFiles[type] ?? []).contains { fileMembers[$0]?.contains(parts[1]) == true }
      if !declared { return .noSuchMember(parts[1]) }
    }
    for part in parts.dropFirst(2) where !types.contains(part) {
      guard fileMembers.values.contains(where: { $0.contains(part) }) else { return .noSuchMember(part) }
    }
    // `Type.member(label:)`: some declaration of the member has those labels.
    if let open = name.firstIndex(of: "("), let member = parts.last, parts.count > 1 {
      let wanted = Self.documentedLabels(name[open...])
      let files = parts.count == 2 ? Array(declaringFiles[type] ?? []) : Array(fileLabels.keys)
      let found = files.contains { fileLabels[$0]?[member]?.contains(wanted) == true }
      if !found { return .noSuchLabels(String(name)) }
    }
    return nil
  }
}
