import Foundation
import PinConfig
import PinTrust
import XCTest

@testable import PinProxy

/// Proxy authentication's parts without sockets: htpasswd entries and the
/// hashes accepted, Basic credentials, the per-client throttle (time
/// injected), and the authenticator's cache and decisions. Hashes are made
/// by the real `htpasswd -B` and verified by the real libxcrypt.
final class ProxyAuthenticatorTests: XCTestCase {
  let start: UInt64 = 7_000_000_000
  let second: UInt64 = 1_000_000_000

  /// `htpasswd -nbB user password`: one bcrypt line.
  func bcryptLine(_ user: String, _ password: String) throws -> String {
    let result = try run("/usr/bin/htpasswd", ["-nbB", "-C", "5", user, password])
    XCTAssertEqual(result.status, 0, "htpasswd (apache2-utils) is required: \(result.error)")
    return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (
      process.terminationStatus, String(decoding: output, as: UTF8.self),
      String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    )
  }

  func authenticator(_ lines: [String], realm: String = "test") throws -> ProxyAuthenticator {
    let file = try TemporaryHtpasswd(lines.joined(separator: "\n") + "\n")
    defer { file.remove() }
    var config = ProxyAuthConfig(
      htpasswd: ConfigPath(path: file.path, location: Location(line: 1, column: 1, key: "htpasswd")))
    config.realm = realm
    return try ProxyAuthenticator(config: config, state: ProxyAuthState())
  }

  func basic(_ user: String, _ password: String) -> String {
    "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
  }

  // MARK: Hashes

  func testBcryptFromHtpasswdVerifiesTheRightPasswordOnly() throws {
    let line = try bcryptLine("alice", "s3cret pass")
    let hash = try PasswordHash(checking: String(line.split(separator: ":", maxSplits: 1)[1]))
    XCTAssertTrue(hash.verify(Array("s3cret pass".utf8)))
    XCTAssertFalse(hash.verify(Array("s3cret pasS".utf8)))
    XCTAssertFalse(hash.verify(Array("s3cret pass\u{0}x".utf8)), "a NUL never matches")
  }

  func testSHA512CryptIsAcceptedAndWeakOrPlainEntriesAreRefusedWithTheirMethod() throws {
    let sha512 = try run("/usr/bin/openssl", ["passwd", "-6", "-salt", "abcdefgh", "pw"]).output
      .trimmingCharacters(in: .whitespacesAndNewlines)
    XCTAssertTrue(try PasswordHash(checking: sha512).verify(Array("pw".utf8)))
    let apr1 = try run("/usr/bin/htpasswd", ["-nbm", "u", "pw"]).output.split(separator: ":")[1]
      .trimmingCharacters(in: .whitespacesAndNewlines)
    XCTAssertThrowsError(try PasswordHash(checking: apr1)) { error in
      XCTAssertTrue("\(error)".contains("Apache MD5"), "\(error)")
    }
    XCTAssertThrowsError(try PasswordHash(checking: "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=")) { error in
      XCTAssertTrue("\(error)".contains("SHA-1"), "\(error)")
    }
    XCTAssertThrowsError(try PasswordHash(checking: "rqXexS6ZhobKA")) { error in
      XCTAssertTrue("\(error)".contains("DES"), "\(error)")
    }
    XCTAssertThrowsError(try PasswordHash(checking: "hunter2")) { error in
      XCTAssertTrue("\(error)".contains("plain-text"), "\(error)")
    }
    XCTAssertThrowsError(try PasswordHash(checking: "$1$abc$def")) { error in
      XCTAssertTrue("\(error)".contains("MD5-crypt"), "\(error)")
    }
  }

  func testAnHtpasswdFileNamesTheLineAndUserOfEveryBadEntry() throws {
    let good = try bcryptLine("alice", "pw")
    XCTAssertThrowsError(try HtpasswdFile(text: "\(good)\nbob:hunter2\n\nnocolon\n\(good)\n", name: "users"))
    { error in
      let text = "\(error)"
      XCTAssertTrue(text.contains("users line 2: user \"bob\": a plain-text password"), text)
      XCTAssertTrue(text.contains("users line 4: not user:hash"), text)
      XCTAssertTrue(text.contains("users line 5: user \"alice\" appears twice"), text)
    }
    XCTAssertThrowsError(try HtpasswdFile(text: "# only a comment\n", name: "users")) { error in
      XCTAssertTrue("\(error)".contains("names no user"), "\(error)")
    }
    XCTAssertEqual(try HtpasswdFile(text: "# users\r\n\(good)\r\n", name: "users").entries.count, 1)
  }

  // MARK: Credentials

  func testBasicCredentialsParseStrictly() {
    let parsed = BasicCredentials(field: basic("alice", "pa:ss word"))
    XCTAssertEqual(parsed?.user, "alice")
    XCTAssertEqual(parsed?.password, Array("pa:ss word".utf8), "only the first colon separates")
    XCTAssertEqual(BasicCredentials(field: "bAsIc " + Base64.encode(Array("a:b".utf8)))?.user, "a")
    XCTAssertNil(BasicCredentials(field: nil))
    XCTAssertNil(BasicCredentials(field: "Bearer abc"))
    XCTAssertNil(BasicCredentials(field: "Basic !!notbase64"))
    XCTAssertNil(BasicCredentials(field: basic("", "pw")), "an empty user")
    XCTAssertNil(BasicCredentials(field: "Basic " + Base64.encode(Array("nocolon".utf8))))
    XCTAssertNil(BasicCredentials(field: basic("al\u{1}ice", "pw")), "controls in the user name")
  }

  // MARK: Throttle

  func testTheThrottleAllowsABurstThenRefillsPerClient() {
    var throttle = AuthThrottle()
    let burst = Int(AuthThrottle.burst)
    for index in 0..<burst { XCTAssertTrue(throttle.take("a", now: start), "attempt \(index)") }
    XCTAssertFalse(throttle.take("a", now: start))
    XCTAssertTrue(throttle.take("b", now: start), "another client has its own bucket")
    XCTAssertEqual(
      throttle.secondsUntilToken("a", now: start), Int((1 / AuthThrottle.perSecond).rounded(.up)))
    let oneToken = UInt64(Double(second) / AuthThrottle.perSecond)
    XCTAssertTrue(throttle.take("a", now: start + oneToken))
    XCTAssertFalse(throttle.take("a", now: start + oneToken))
    throttle.refund("a", now: start + oneToken)
    XCTAssertTrue(throttle.take("a", now: start + oneToken), "a verified credential gives its token back")
  }

  func testAFullTableLocksOutNoNewcomerAndMakesRoomFromRefilledThenTheFullestBucket() {
    for keys in [
      (0..<AuthThrottle.maximumClients).map { "198.18.\($0 >> 8).\($0 & 255)" },
      // One IPv6 /52 is 4,096 /64s, each its own admission key.
      (0..<AuthThrottle.maximumClients).map { "2001:db8:0:\(String($0, radix: 16))::/64" },
    ] {
      var throttle = AuthThrottle()
      // Every bucket owes: client 0 one token, the others three.
      for (index, key) in keys.enumerated() {
        for _ in 0..<(index == 0 ? 1 : 3) { XCTAssertTrue(throttle.take(key, now: start)) }
      }
      XCTAssertEqual(throttle.count, AuthThrottle.maximumClients)
      // A newcomer owes nothing: not refused, and it gets a bucket of its own.
      XCTAssertEqual(throttle.secondsUntilToken("newcomer", now: start), 0)
      XCTAssertTrue(throttle.take("newcomer", now: start))
      XCTAssertEqual(throttle.count, AuthThrottle.maximumClients, "the bound holds")
      // The bucket closest to full made room; the deeper debts stay.
      XCTAssertEqual(throttle.secondsUntilToken(keys[0], now: start), 0, "client 0 was forgotten")
      for _ in 0..<7 { XCTAssertTrue(throttle.take(keys[1], now: start)) }
      XCTAssertFalse(throttle.take(keys[1], now: start), "client 1 still owes its three tokens")
      // Refilled buckets go before any debt is forgiven.
      let refilled = start + UInt64(3 / AuthThrottle.perSecond) * second + second
      XCTAssertTrue(throttle.take("second newcomer", now: refilled))
      XCTAssertLessThan(throttle.count, 10, "every refilled bucket was dropped at once")
    }
  }

  func testAMalformedFieldCostsNothingAndAVerifiedCredentialIgnoresAnotherClientsDebt() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    // Verified once from the shared loopback key.
    guard case .verify(let first) = auth.check(basic("alice", "right"), client: "127.0.0.0/8", now: start),
      case .allowed = auth.conclude(first, matched: true)
    else { return XCTFail() }
    // Fields that are no Basic credential guess nothing: no token, no bucket.
    for field in ["Basic !!!", "Bearer x", "Basic " + Base64.encode(Array("nocolon".utf8))] {
      for _ in 0..<50 {
        guard case .refused(let refusal) = auth.check(field, client: "127.0.0.0/8", now: start) else {
          return XCTFail()
        }
        XCTAssertEqual(refusal.status, 407)
      }
    }
    XCTAssertEqual(auth.state.throttle.withLock { $0.count }, 0, "malformed fields took tokens")
    // Another process on loopback spends the shared bucket on wrong guesses…
    for _ in 0..<Int(AuthThrottle.burst) {
      guard case .verify(let guess) = auth.check(basic("alice", "guess"), client: "127.0.0.0/8", now: start)
      else { return XCTFail() }
      _ = auth.conclude(guess, matched: false)
    }
    guard
      case .refused(let throttled) = auth.check(basic("alice", "other"), client: "127.0.0.0/8", now: start)
    else { return XCTFail() }
    XCTAssertEqual(throttled.status, 429)
    // …and the known-good credential is served all the same.
    guard case .allowed = auth.check(basic("alice", "right"), client: "127.0.0.0/8", now: start) else {
      return XCTFail("a verified credential was refused for another client's debt")
    }
  }

  func testAFailedCheckTakesTheCostliestEntrysTimeWhicheverUserWasNamed() throws {
    // alice's hash is cheap (cost 5), bob's costly (cost 11).
    let cheap = try bcryptLine("alice", "right")
    let costly = try run("/usr/bin/htpasswd", ["-nbB", "-C", "11", "bob", "right"]).output
      .trimmingCharacters(in: .whitespacesAndNewlines)
    let auth = try authenticator([cheap, costly])
    XCTAssertEqual(auth.file.mixedCosts, [5, 11])
    func failedCheckSeconds(_ user: String) -> Double {
      guard case .verify(let pending) = auth.check(basic(user, "wrong"), client: UUID().uuidString) else {
        XCTFail("a new credential is hashed")
        return 0
      }
      let done = expectation(description: user)
      let started = Date()
      nonisolated(unsafe) var elapsed = 0.0
      auth.verify(pending) { decision in
        if case .refused(let refusal) = decision { XCTAssertEqual(refusal.status, 407) } else { XCTFail() }
        elapsed = Date().timeIntervalSince(started)
        done.fulfill()
      }
      wait(for: [done], timeout: 30)
      return elapsed
    }
    // Interleaved, and the fastest of five each: a busy machine only ever
    // makes a check slower, so the minimum is each one's own cost (a median
    // of three once caught the unknown user's checks behind a build).
    var unknown = Double.infinity
    var cheapUser = Double.infinity
    for _ in 0..<5 {
      unknown = min(unknown, failedCheckSeconds("mallory"))
      cheapUser = min(cheapUser, failedCheckSeconds("alice"))
    }
    // A cost-5 hash alone takes about 1/64 of a cost-11 one.
    XCTAssertGreaterThan(
      cheapUser, unknown * 0.7,
      "a wrong password for alice (\(cheapUser) s) answered much sooner than for an unknown user (\(unknown) s)"
    )
  }

  // MARK: Decisions

  func testDecisionsMissingWrongRightAndCached() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")], realm: "shop")
    guard case .refused(let missing) = auth.check(nil, client: "c") else { return XCTFail("no credential") }
    XCTAssertEqual(missing.status, 407)
    XCTAssertEqual(missing.headers.first?.value, "Basic realm=\"shop\", charset=\"UTF-8\"")
    guard case .verify(let wrong) = auth.check(basic("alice", "wrong"), client: "c") else {
      return XCTFail("a new credential is hashed")
    }
    guard case .refused(let refused) = auth.conclude(wrong, matched: false) else { return XCTFail() }
    XCTAssertEqual(refused.status, 407)
    guard case .verify(let right) = auth.check(basic("alice", "right"), client: "c") else { return XCTFail() }
    guard case .allowed(let verified) = auth.conclude(right, matched: true) else { return XCTFail() }
    XCTAssertEqual(verified.user, "alice")
    guard case .allowed = auth.check(basic("alice", "right"), client: "c") else {
      return XCTFail("a verified credential is served from the cache")
    }
    guard case .verify = auth.check(basic("alice", "right "), client: "c") else {
      return XCTFail("another password is not the cached one")
    }
  }

  func testAnUnknownUserIsHashedAndRefused() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    guard case .verify(let pending) = auth.check(basic("mallory", "right"), client: "c") else {
      return XCTFail()
    }
    XCTAssertNil(pending.hash)
    let done = expectation(description: "verified")
    auth.verify(pending) { decision in
      if case .refused(let failure) = decision { XCTAssertEqual(failure.status, 407) } else { XCTFail() }
      done.fulfill()
    }
    wait(for: [done], timeout: 10)
  }

  func testAThrottledClientGets429EvenForTheRightPassword() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    for _ in 0..<Int(AuthThrottle.burst) {
      guard case .verify(let pending) = auth.check(basic("alice", "guess"), client: "c", now: start) else {
        return XCTFail()
      }
      _ = auth.conclude(pending, matched: false)
    }
    guard case .refused(let throttled) = auth.check(basic("alice", "right"), client: "c", now: start) else {
      return XCTFail()
    }
    XCTAssertEqual(throttled.status, 429)
    XCTAssertEqual(throttled.headers.first?.name, "Retry-After")
    guard case .refused(let missing) = auth.check(nil, client: "c", now: start) else { return XCTFail() }
    XCTAssertEqual(missing.status, 407, "asking for credentials is not throttled")
    guard case .verify = auth.check(basic("alice", "right"), client: "other", now: start) else {
      return XCTFail("another client is not throttled")
    }
  }

  func testAReloadedFileStillAcceptsOnlyTheSameUserWithTheSameHash() throws {
    let alice = try bcryptLine("alice", "one")
    let first = try authenticator([alice])
    guard case .verify(let pending) = first.check(basic("alice", "one"), client: "c"),
      case .allowed(let verified) = first.conclude(pending, matched: true)
    else { return XCTFail() }
    XCTAssertTrue(try authenticator([alice]).stillAccepts(verified))
    XCTAssertFalse(try authenticator([try bcryptLine("alice", "two")]).stillAccepts(verified))
    XCTAssertFalse(try authenticator([try bcryptLine("bob", "one")]).stillAccepts(verified))
  }

  // MARK: Bounds

  func testHashingPastTheGlobalBoundIsAnswered503AtOnceAndGivesTheTokenBack() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    guard case .verify(let pending) = auth.check(basic("alice", "guess"), client: "c", now: start) else {
      return XCTFail()
    }
    auth.state.hashing.store(ProxyAuthState.maximumHashing, ordering: .relaxed)
    let answered = Locked<ProxyAuthenticator.Decision?>(nil)
    auth.verify(pending) { decision in answered.withLock { $0 = decision } }
    guard case .refused(let busy)? = answered.withLock({ $0 }) else {
      return XCTFail("answered at once, without hashing")
    }
    XCTAssertEqual(busy.status, 503)
    XCTAssertEqual(auth.state.hashing.load(ordering: .relaxed), ProxyAuthState.maximumHashing)
    // The token taken for the refused hash came back: the burst is whole again.
    for index in 0..<Int(AuthThrottle.burst) {
      XCTAssertTrue(auth.state.throttle.withLock { $0.take("c", now: start) }, "token \(index)")
    }
  }

  func testOversizedInputsAreRefusedWhereTheyAreRead() throws {
    let huge = "Basic " + String(repeating: "A", count: 4100)
    XCTAssertNil(BasicCredentials(field: huge), "a credential field over 4096 base64 characters")
    let line = try bcryptLine("alice", "pw")
    let big = try TemporaryHtpasswd(
      String(repeating: "# padding to go past the file bound\n", count: HtpasswdFile.maximumBytes / 36 + 1)
        + line)
    defer { big.remove() }
    XCTAssertThrowsError(try HtpasswdFile(path: big.path))
    let many = (0...HtpasswdFile.maximumEntries).map { "u\($0):" + line.split(separator: ":")[1] }
    XCTAssertThrowsError(try HtpasswdFile(text: many.joined(separator: "\n"), name: "many")) { error in
      XCTAssertTrue("\(error)".contains("more than \(HtpasswdFile.maximumEntries) users"), "\(error)")
    }
  }
}

struct TemporaryHtpasswd {
  let path: String

  init(_ text: String) throws {
    path = FileManager.default.temporaryDirectory.appendingPathComponent("htpasswd-\(UUID().uuidString)").path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
  }

  func remove() { try? FileManager.default.removeItem(atPath: path) }
}
