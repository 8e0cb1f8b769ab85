import PinTrust
import XCTest

final class DomainTableTests: XCTestCase {
  func table(_ rules: [(String, Bool)]) throws -> DomainTable<String> {
    var table = DomainTable<String>()
    for (domain, subdomains) in rules {
      try table.insert(domain: TrustHost(domain)!, includesSubdomains: subdomains, rule: domain)
    }
    return table
  }

  func rule(_ table: DomainTable<String>, _ host: String) -> String? { table.lookup(TrustHost(host)!)?.rule }

  func testExactBeatsParentAndLongestParentWins() throws {
    let table = try table([("example.com", true), ("api.example.com", true), ("pay.api.example.com", false)])
    XCTAssertEqual(rule(table, "example.com"), "example.com")
    XCTAssertEqual(rule(table, "www.example.com"), "example.com")
    XCTAssertEqual(rule(table, "api.example.com"), "api.example.com")
    XCTAssertEqual(rule(table, "v2.api.example.com"), "api.example.com")
    XCTAssertEqual(rule(table, "pay.api.example.com"), "pay.api.example.com")
    XCTAssertEqual(rule(table, "x.pay.api.example.com"), "api.example.com", "pay.… has no includesSubdomains")
    XCTAssertNil(rule(table, "example.org"))
    XCTAssertNil(rule(table, "notexample.com"))
  }

  func testWithoutIncludesSubdomainsOnlyTheExactNameMatches() throws {
    let table = try table([("bank.example", false)])
    XCTAssertEqual(rule(table, "BANK.example."), "bank.example")
    XCTAssertNil(rule(table, "www.bank.example"))
  }

  func testUnicodeRuleMatchesALabelHost() throws {
    let table = try table([("bücher.example", true)])
    XCTAssertEqual(rule(table, "www.xn--bcher-kva.example"), "bücher.example")
  }

  func testIPRulesMatchOnlyTheSameAddress() throws {
    let table = try table([("10.0.0.1", true)])
    XCTAssertEqual(rule(table, "10.0.0.1"), "10.0.0.1")
    XCTAssertNil(rule(table, "10.0.0.2"))
  }

  func testDuplicateDomainIsAnError() throws {
    XCTAssertThrowsError(try table([("example.com", true), ("EXAMPLE.com.", false)])) { error in
      XCTAssertEqual(error as? DomainTable<String>.InsertError, .duplicate(.dns("example.com")))
    }
  }
}
